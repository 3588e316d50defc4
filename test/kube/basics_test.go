package kube_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
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

// TestNodeReady: the node is Ready and CoreDNS is available.
func TestNodeReady(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, cond := range c.node(ctx, t).Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
			t.Fatalf("node not Ready: %s", cond.Message)
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

// TestServiceFromNode: from the node, the cluster's DNS resolves the API
// server's service to its ClusterIP, and kube-proxy takes a TLS connection
// to that ClusterIP to the API server (its certificate checked).
func TestServiceFromNode(t *testing.T) {
	newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(dnsServiceIP, "53"))
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
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "kubernetes.default.svc"}}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0], "443"))
	if err != nil {
		t.Fatalf("TLS to the API server's ClusterIP: %v", err)
	}
	conn.Close()
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

// TestDefaultStorageClass: a claim without a class is bound to a volume of
// the default class, a directory on the node, which goes with the claim.
func TestDefaultStorageClass(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
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
	var dir string
	eventually(ctx, t, "the claim bound", func(ctx context.Context) error {
		cl, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cl.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %s", cl.Status.Phase)
		}
		pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, cl.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pv.Spec.HostPath == nil {
			return errors.New("the volume is not a host path")
		}
		dir = pv.Spec.HostPath.Path
		return nil
	})
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the volume's directory %s: %v", dir, err)
	}
	if err := claims.Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the volume's directory removed", func(context.Context) error {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %v", dir, err)
		}
		return nil
	})
}
