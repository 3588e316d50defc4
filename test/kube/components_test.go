package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// replaceNSPAndDNS deletes the configuration server's pod, then CoreDNS's,
// while the external host probes the VIP. Neither is on the data path, so
// no probe may be lost; every proxy keeps its pod and connects to the new
// nsp (found again through the new CoreDNS), and a target replaced
// afterwards is served.
func (tr *trench) replaceNSPAndDNS(ctx context.Context, t *testing.T) {
	proxies := tr.c.proxyPods(ctx, t)
	stop := tr.proberOn(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	var figures []string
	for _, p := range []struct{ namespace, selector string }{
		{chartNamespace, "app.kubernetes.io/component=nsp"},
		{"kube-system", "k8s-app=kube-dns"},
	} {
		list, err := tr.c.client.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{LabelSelector: p.selector})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("pods of %s: %v, %d", p.selector, err, len(list.Items))
		}
		deleted := time.Now()
		tr.c.deletePod(ctx, t, &list.Items[0], p.selector)
		figures = append(figures, fmt.Sprintf("%s Ready after %.1f s", p.selector, time.Since(deleted).Seconds()))
	}
	time.Sleep(3 * time.Second) // what follows CoreDNS's return
	series := stop()
	t.Logf("FIGURE: nsp then CoreDNS pods replaced: %s; %d of %d probes lost (longest gap %s)",
		strings.Join(figures, ", "), series.Failures(), len(series), series.LongestGap().Len().Round(time.Millisecond))
	noOutage(t, series, "the nsp and CoreDNS were replaced", start)
	tr.c.waitNSPConnections(ctx, t)
	for _, p := range proxies {
		now, err := tr.c.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || restarts(now) != restarts(p) {
			t.Errorf("the proxy %s (%d restarts) was replaced or restarted: %v", p.Name, restarts(p), err)
		}
	}
	after := tr.deleteTarget(ctx, t, tr.targetNames(ctx, t)[0])
	checkUnique(t, after)
	tr.waitServed(ctx, t)
}

// waitNSPConnections waits until every proxy has an established
// connection to the configuration server's port.
func (c *cluster) waitNSPConnections(ctx context.Context, t *testing.T) {
	t.Helper()
	port := fmt.Sprintf(":%04X", nspPort)
	eventually(ctx, t, "every proxy connected to the nsp", func(ctx context.Context) error {
		for _, p := range c.proxyPods(ctx, t) {
			if !slices.ContainsFunc(c.proxyConns(ctx, t, p), func(conn string) bool { return strings.HasSuffix(conn, port) }) {
				return fmt.Errorf("the proxy %s has no connection to the nsp", p.Name)
			}
		}
		return nil
	})
}
