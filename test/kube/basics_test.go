package kube_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The test cluster's fixed addresses (scripts/cluster/lib.sh).
const (
	dnsServiceIP = "10.96.0.10"
	apiServiceIP = "10.96.0.1"
	clusterCA    = "/var/lib/causeway-cluster/pki/ca.crt"
)

// TestNodeReady: every node is Ready and CoreDNS is available.
func TestNodeReady(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range c.nodes(ctx, t) {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				t.Fatalf("node %s not Ready: %s", n.Name, cond.Message)
			}
		}
	}
	eventually(ctx, t, "CoreDNS available", func(ctx context.Context) error {
		d, err := c.client.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 1 {
			return fmt.Errorf("%d available", d.Status.AvailableReplicas)
		}
		return nil
	})
}

// TestServiceFromNode: from every node (its network namespace), the
// cluster's DNS resolves the API server's service to its ClusterIP, and
// kube-proxy takes a TLS connection to that ClusterIP to the API server (its
// certificate checked).
func TestServiceFromNode(t *testing.T) {
	newCluster(t)
	for _, node := range clusterNodes(t) {
		t.Run(node, func(t *testing.T) { serviceFromNode(t, node) })
	}
}

func serviceFromNode(t *testing.T, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := nodeDialer(t, node)
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, net.JoinHostPort(dnsServiceIP, "53"))
	}}
	var addrs []string
	eventually(ctx, t, "resolve kubernetes.default", func(ctx context.Context) (err error) {
		addrs, err = resolver.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
		return err
	})
	if len(addrs) != 1 || addrs[0] != apiServiceIP {
		t.Fatalf("kubernetes.default resolves to %v, want [%s]", addrs, apiServiceIP)
	}
	pem, err := os.ReadFile(clusterCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	raw, err := dial(ctx, "tcp", net.JoinHostPort(addrs[0], "443"))
	if err != nil {
		t.Fatalf("TCP to the API server's ClusterIP: %v", err)
	}
	conn := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "kubernetes.default.svc"})
	defer conn.Close()
	if err := conn.HandshakeContext(ctx); err != nil {
		t.Fatalf("TLS to the API server's ClusterIP: %v", err)
	}
}

// TestServiceFromPod: a pod resolves the API server's service through the
// cluster's DNS and connects to it (the probe exits 0 only then).
func TestServiceFromPod(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := c.runProbe(ctx, t, probePod{})
	if err != nil || !strings.Contains(out, "connected") {
		t.Fatalf("probe: %v; output: %q", err, out)
	}
}

// TestDefaultStorageClass: a claim without a class is bound to a local
// volume of the default class, a directory on the node, and a pod of a
// non-root user with that fsGroup (as the chart's IPAM) writes into it.
func TestDefaultStorageClass(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.recycleVolumes(t)
	claims := c.client.CoreV1().PersistentVolumeClaims("default")
	claim, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "claim-"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi"),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = claims.Delete(context.Background(), claim.Name, metav1.DeleteOptions{})
		c.waitClaimGone(t, "default", claim.Name)
		c.recycleVolumes(t)
	})
	const user = 10005
	if out, err := c.runProbe(ctx, t, probePod{
		args:   []string{"-write", "/data/file"},
		claims: map[string]string{claim.Name: "/data"},
		user:   user,
	}); err != nil {
		t.Fatalf("write to the volume: %v: %s", err, out)
	}
	cl, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, cl.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.Local == nil || pv.Spec.StorageClassName != "local" {
		t.Fatalf("volume %s: class %q, local %v", pv.Name, pv.Spec.StorageClassName, pv.Spec.Local)
	}
	fi, err := os.Stat(filepath.Join(pv.Spec.Local.Path, "file"))
	if err != nil {
		t.Fatalf("the file on the node: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != user || st.Gid != user {
		t.Fatalf("the file's owner %d:%d, want %d:%d", st.Uid, st.Gid, user, user)
	}
}
