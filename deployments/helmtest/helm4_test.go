package helmtest

import (
	"fmt"
	"log/slog"

	action4 "helm.sh/helm/v4/pkg/action"
	common4 "helm.sh/helm/v4/pkg/chart/common"
	loader4 "helm.sh/helm/v4/pkg/chart/loader"
	release4 "helm.sh/helm/v4/pkg/release"
)

// renderHelm4 does what renderHelm3 does with Helm 4's SDK.
func renderHelm4(vals map[string]any) (string, error) {
	chrt, err := loader4.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("load chart: %w", err)
	}
	install := action4.NewInstall(action4.NewConfiguration(action4.ConfigurationSetLogger(slog.DiscardHandler)))
	install.DryRunStrategy = action4.DryRunClient
	install.Replace = true
	install.ReleaseName = "causeway"
	install.Namespace = namespace
	install.KubeVersion = &common4.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", err
	}
	acc, err := release4.NewAccessor(rel)
	if err != nil {
		return "", fmt.Errorf("Helm 4 release: %w", err)
	}
	return acc.Manifest(), nil
}
