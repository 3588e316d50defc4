package kube_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// spireSockets is where the SPIRE agent serves the Workload API on the node.
const spireSockets = "/run/spire/sockets"

// repoPath returns the path of rel in this clone.
func repoPath(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", rel)
}

// scriptPath returns the path of scripts/cluster/NAME in this clone.
func scriptPath(name string) string { return repoPath(filepath.Join("scripts", "cluster", name)) }

// registerSPIFFE registers the service account sa of namespace ns with the
// cluster's SPIRE, as a user of the chart does (docs/kubernetes.md).
func registerSPIFFE(t *testing.T, ns string, sas ...string) {
	t.Helper()
	out, err := exec.Command(scriptPath("spire-register.sh"), append([]string{ns}, sas...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("spire-register.sh %s %v: %v\n%s", ns, sas, err, out)
	}
}

// serviceAccount makes the service account name in namespace ns.
func (c *cluster) serviceAccount(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	_, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestSPIRE: a pod whose service account is registered gets the SVID
// spiffe://example.org/ns/<namespace>/sa/<account> from the node's agent;
// a pod of an account that is not registered gets none within 15 s, after
// the agent has learnt the other registration.
func TestSPIRE(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.serviceAccount(ctx, t, "default", "registered")
	c.serviceAccount(ctx, t, "default", "unregistered")
	registerSPIFFE(t, "default", "registered")
	probe := func(sa, timeout string) (string, error) {
		return c.runProbe(ctx, t, probePod{
			serviceAccount: sa,
			args:           []string{"-svid", "unix://" + spireSockets + "/agent.sock", "-timeout", timeout},
			hostPaths:      map[string]string{spireSockets: spireSockets},
		})
	}
	out, err := probe("registered", "60s")
	if want := "svid spiffe://example.org/ns/default/sa/registered"; err != nil || !strings.Contains(out, want) {
		t.Fatalf("registered account: %v; output %q, want %q", err, out, want)
	}
	if out, err := probe("unregistered", "15s"); err == nil {
		t.Fatalf("an unregistered account got an SVID: %q", out)
	}
}
