package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/causeway-net/causeway/pkg/ipam/leader"
	"github.com/causeway-net/causeway/pkg/ipam/store/kube"
)

// kubeCommand is what the commands on the Kubernetes store (export,
// delete-records) share: the clients of IPAM_KUBECONFIG (or the pod's
// account), the namespace, and the replicas' Lease taken so that no
// replica serves while they work.
type kubeCommand struct {
	ns     string
	opts   kube.Options
	leases coordinationv1.LeasesGetter
	held   *leader.Held
}

// takeLeaseFor is how long a command holds the Lease without renewing it:
// if it dies, the replicas take the Lease back after that.
const takeLeaseFor = 2 * time.Minute

// openKubeCommand reaches the API server and takes the replicas' Lease as
// identity, waiting up to wait for a replica's Lease to end.
func openKubeCommand(ctx context.Context, c *Config, identity string, wait time.Duration) (*kubeCommand, error) {
	rc, err := restConfig(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	ns, _, err := c.replicaNames()
	if err != nil {
		return nil, err
	}
	records, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	leases, err := coordinationv1.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	held, err := leader.Take(wctx, leases, ns, c.leaseName(), identity, takeLeaseFor, time.Second)
	if err != nil {
		return nil, err
	}
	return &kubeCommand{
		ns: ns, leases: leases, held: held,
		opts: kube.Options{Client: records, Namespace: ns, Trench: c.TrenchName, Logger: slog.New(slog.DiscardHandler)},
	}, nil
}
