package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/causeway-net/causeway/pkg/ipam/nodewatch"
)

// watchDeletedNodes starts the watch of the cluster's Nodes that frees the
// subnets of a deleted node once their leases end (IPAM_FREE_DELETED_NODES),
// on the API server of rc, for engine (the bbolt store's engine, or a
// replica's gate). It returns what stops the watch and waits for it.
func watchDeletedNodes(ctx context.Context, rc *rest.Config, engine nodewatch.Engine, logger *slog.Logger) (func(), error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for the nodes' watch: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		(&nodewatch.Watcher{Client: cs, Engine: engine, Logger: logger}).Run(wctx)
	}()
	return func() {
		cancel()
		wg.Wait()
	}, nil
}
