package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// rollbackVIPs: helm upgrade that adds the spare VIPs (every proxy then
// has a rule from each), then helm rollback to the revision before it,
// while the external host probes the installed VIPs (TCP and UDP). After
// the rollback the release is as before the upgrade: its values and the
// nsp's file the same, a new revision; every proxy's rules from the spare
// VIPs gone and those from the installed ones kept; the same proxy pods,
// bridge addresses and ports; the targets' addresses kept. Neither step
// cuts a probe of an installed VIP.
func (tr *trench) rollbackVIPs(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // it happens at all
	defer cancel()
	proxies := tr.c.proxyPods(ctx, t)
	var paths []string
	for _, p := range proxies {
		paths = append(paths, tr.c.podNetNS(ctx, t, p, proxyContainer))
	}
	kernel := tr.suiteKernel(ctx, t, proxies)
	addrs := tr.targetAddrs(ctx, t)
	values := helmStdout(t, "get", "values", chartRelease, "--namespace", chartNamespace, "--output", "yaml")
	nspFile := tr.c.nspConfig(ctx, t)
	revision := helmRevision(t)
	stop, start, added := tr.addSpareVIPs(ctx, t, paths)
	back := time.Now()
	helm(t, "rollback", chartRelease, fmt.Sprint(revision), "--namespace", chartNamespace)
	eventually(ctx, t, "every proxy's rules from the added VIPs gone", func(context.Context) error {
		return rulesFrom(t, paths, spareVIPs, false)
	})
	removed := time.Since(back)
	lost, total, longest := noOutages(t, stop(), "the release was upgraded and rolled back", start)
	t.Logf("FIGURE: helm upgrade adding a VIP per family, then helm rollback: every proxy's rule from them after %.1f s, gone %.1f s after the rollback began; the installed VIPs: %d of %d probes lost, longest gap %s",
		added.Seconds(), removed.Seconds(), lost, total, longest.Round(time.Millisecond))

	if got := helmStdout(t, "get", "values", chartRelease, "--namespace", chartNamespace, "--output", "yaml"); got != values {
		t.Errorf("the release's values were\n%s\nafter the rollback\n%s", values, got)
	}
	if got := tr.c.nspConfig(ctx, t); !maps.Equal(got, nspFile) {
		t.Errorf("the nsp's file was %q, after the rollback %q", nspFile, got)
	}
	if got := helmRevision(t); got != revision+2 {
		t.Errorf("the release at revision %d after an upgrade and a rollback from %d, want %d", got, revision, revision+2)
	}
	tr.checkProxiesKept(ctx, t, proxies, kernel)
	checkKept(t, addrs, tr.targetAddrs(ctx, t))
}

// addSpareVIPs starts probing every installed VIP and, a second later,
// adds the spare VIPs to the release (helm upgrade), then waits until
// every proxy (its namespace in paths) has a rule from each. When t ends
// the release declares the installed VIPs only, as before. It returns the
// probes' stop, when the upgrade began and how long the rules took.
func (tr *trench) addSpareVIPs(ctx context.Context, t *testing.T, paths []string) (func() map[string]traffic.Series, time.Time, time.Duration) {
	t.Helper()
	t.Cleanup(func() {
		if strings.Contains(fmt.Sprint(tr.c.nspConfig(context.Background(), t)), spareVIPs[0].String()) {
			helmUpgradeValues(t, installedVIPsValues)
		}
	})
	stop := tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	helmUpgradeValues(t, spareVIPsValues)
	eventually(ctx, t, "every proxy's rules from the added VIPs", func(context.Context) error {
		return rulesFrom(t, paths, spareVIPs, true)
	})
	return stop, start, time.Since(start)
}

// checkProxiesKept fails t unless the suite's proxies are the pods of
// proxies, not restarted, and hold in their namespaces what they held
// (kernel, suiteKernel).
func (tr *trench) checkProxiesKept(ctx context.Context, t *testing.T, proxies []*corev1.Pod, kernel []string) {
	t.Helper()
	now := tr.c.proxyPods(ctx, t)
	for i, p := range proxies {
		if now[i].UID != p.UID || restarts(now[i]) != restarts(p) {
			t.Errorf("proxy %s (%d restarts) is now %s (%d restarts)", p.Name, restarts(p), now[i].Name, restarts(now[i]))
		}
	}
	if got := tr.suiteKernel(ctx, t, now); !slices.Equal(got, kernel) {
		t.Errorf("the suite's proxies held %q, now %q", kernel, got)
	}
}

// nspConfig returns the data of the nsp's ConfigMap (its file).
func (c *cluster) nspConfig(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps(chartNamespace).Get(ctx, "nsp-config-"+chartRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

// helmRevision returns the revision of the suite's release.
func helmRevision(t *testing.T) int {
	t.Helper()
	var status struct {
		Version int `json:"version"`
	}
	out := helmStdout(t, "status", chartRelease, "--namespace", chartNamespace, "--output", "json")
	if err := json.Unmarshal([]byte(out), &status); err != nil || status.Version == 0 {
		t.Fatalf("helm status: %v: %s", err, out)
	}
	return status.Version
}
