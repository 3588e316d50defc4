package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/causeway-net/causeway/internal/kubeclient"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/leader"
)

// serviceAccountNamespace is where a pod finds its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// startReplica starts this replica's part in the election; it serves only
// while it leads (pkg/ipam/leader).
func startReplica(ctx context.Context, cfg *Config, ecfg ipam.Config, hs *grpchealth.Server, creds credentials.TransportCredentials, logger *slog.Logger) (*backend, error) {
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	ns, id, err := cfg.replicaNames()
	if err != nil {
		return nil, err
	}
	return startElection(ctx, rc, ns, id, cfg, ecfg, hs, creds, logger)
}

// startElection runs the election against the API server of rc, and with
// IPAM_LEADER_ADDRESS the forwarding of a standby's calls to the leader.
func startElection(ctx context.Context, rc *rest.Config, ns, id string, cfg *Config, ecfg ipam.Config, hs *grpchealth.Server, creds credentials.TransportCredentials, logger *slog.Logger) (*backend, error) {
	records, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	leases, err := coordinationv1.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	health := &replicaHealth{hs: hs}
	health.update()
	gate := &leader.Gate{OnChange: health.setServing}
	ecfg.OnStoreHealth = health.setServing
	ectx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	onNewLeader := gate.SetLeader
	if cfg.LeaderAddress != "" {
		_, retry := leader.Timings(cfg.LeaderLeaseDuration)
		fw := &leader.Forwarder{
			Self: id, Address: cfg.LeaderAddress, Creds: creds,
			Period: retry, OnReachable: health.setForwarding, Logger: logger,
		}
		gate.Standby = fw
		onNewLeader = func(id string) {
			gate.SetLeader(id)
			fw.SetLeader(id)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fw.Run(ectx)
		}()
	}
	if cfg.FreeDeletedNodes {
		stopWatch, err := watchDeletedNodes(ectx, rc, gate, logger)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ectx.Done()
			stopWatch()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := leader.Elect(ectx, leader.Config{
			Leases: leases, Records: records, Namespace: ns, LeaseName: cfg.leaseName(), Identity: id,
			LeaseDuration: cfg.LeaderLeaseDuration, Engine: ecfg, Gate: gate, OnNewLeader: onNewLeader, Logger: logger,
		})
		if err != nil {
			logger.Error("leader election ended", "error", err)
		}
	}()
	logger.Info("IPAM replica on the Kubernetes store", "namespace", ns, "identity", id, "lease", cfg.leaseName())
	return &backend{
		server: gate, syncer: gate, collectors: []prometheus.Collector{gate},
		stop: func() {
			cancel()
			wg.Wait()
		},
	}, nil
}

// restConfig reaches the API server: from a kubeconfig file, or the pod's
// service account.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rc, err := kubeclient.Config(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes API (IPAM_KUBECONFIG %q): %w", kubeconfig, err)
	}
	// The store batches its writes; client-go's default of 5 per second
	// would be its bottleneck.
	rc.QPS, rc.Burst = 1000, 2000
	return rc, nil
}

// replicaNames returns the namespace and identity of this replica.
func (c *Config) replicaNames() (ns, id string, err error) {
	ns, id = c.KubeNamespace, c.Identity
	if ns == "" {
		b, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return "", "", fmt.Errorf("IPAM_KUBE_NAMESPACE is empty and the pod's namespace is unknown: %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	if id == "" {
		if id, err = os.Hostname(); err != nil {
			return "", "", fmt.Errorf("IPAM_IDENTITY is empty and the host name is unknown: %w", err)
		}
	}
	return ns, id, nil
}
