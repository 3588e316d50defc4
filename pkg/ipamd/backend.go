package ipamd

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam"
)

// backend is what serves behind the gRPC server: one engine on a bbolt
// file, or the engine of whichever term this replica leads.
type backend struct {
	server     ipamv1.IpamServer
	syncer     ipam.ConduitSyncer
	collectors []prometheus.Collector
	// stop stops serving, flushes and closes the store.
	stop func()
}

// setHealth returns a hook that sets ipam.v1.Ipam's serving status.
func setHealth(hs *grpchealth.Server) func(ok bool) {
	return func(ok bool) {
		hs.SetServingStatus(ipamv1.Ipam_ServiceDesc.ServiceName, servingStatus(ok))
	}
}

// startBolt imports a Meridio database found at the datasource, opens the
// bbolt store and its engine and starts the snapshots.
func startBolt(ctx context.Context, cfg *Config, ecfg ipam.Config, hs *grpchealth.Server, _ credentials.TransportCredentials, logger *slog.Logger) (*backend, error) {
	if err := importOnStart(ctx, cfg, logger); err != nil {
		return nil, err
	}
	st, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	closeStore := func() {
		if err := st.Close(); err != nil {
			logger.Error("closing the store", "error", err)
		}
	}
	hs.SetServingStatus(ipamv1.Ipam_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	ecfg.OnStoreHealth = setHealth(hs)
	engine, err := ipam.New(ctx, st, ecfg)
	if err != nil {
		closeStore()
		return nil, damageExit(cfg, fmt.Errorf("engine: %w", err))
	}
	stopWatch := func() {}
	if cfg.FreeDeletedNodes {
		if stopWatch, err = watchBoltNodes(ctx, cfg, engine, logger); err != nil {
			engine.Close()
			closeStore()
			return nil, err
		}
	}
	snaps := startSnapshots(cfg, st, logger)
	return &backend{
		server: ipam.NewServer(engine), syncer: engine,
		collectors: []prometheus.Collector{engine, snaps.results},
		stop: func() {
			stopWatch()
			snaps.stopLoop()
			engine.Close() // flushes leases and queued changes before the store closes
			snaps.final()
			closeStore()
		},
	}, nil
}

// watchBoltNodes starts the watch of deleted nodes for the bbolt store's
// engine, on the API server of IPAM_KUBECONFIG or the pod's account.
func watchBoltNodes(ctx context.Context, cfg *Config, engine *ipam.Engine, logger *slog.Logger) (func(), error) {
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return watchDeletedNodes(ctx, rc, engine, logger)
}
