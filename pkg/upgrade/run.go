package upgrade

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"k8s.io/client-go/kubernetes"

	"github.com/causeway-net/causeway/internal/kubeclient"
)

// Run upgrades the DaemonSets cfg selects through the API server (the
// kubeconfig's, or the pod's service account's) and logs what it did to
// each pod; it fails when the upgrade stopped. With cfg.Report it reports
// on the upgrade Job of that name instead (Reporter).
func Run(ctx context.Context, cfg *Config, log *slog.Logger) error {
	rc, err := kubeclient.Config(cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes API (UPGRADE_KUBECONFIG %q): %w", cfg.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if cfg.Report != "" {
		return NewReporter(cs, *cfg, log).Run(ctx, os.Stdout)
	}
	steps, err := New(cs, *cfg, log).Run(ctx)
	count := map[Action]int{}
	for _, s := range steps {
		count[s.Action]++
	}
	args := []any{"inPlace", count[InPlace], "replaced", count[Replaced], "skipped", count[Skipped]}
	if err != nil {
		log.Error("upgrade stopped; run it again (the same helm upgrade) to resume", append(args, "error", err)...)
		return err
	}
	log.Info("upgrade done", args...)
	return nil
}
