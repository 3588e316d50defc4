package ipamd

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/grpcsecurity"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// nodeBinding is the check of IPAM_NODE_BOUND (ipam.CallerNodes), nil when
// off: not asked for, or in insecure mode (callers have no ID).
type nodeBinding struct{ c *ipam.CallerNodes }

func callerNodes(cfg *Config, sec *grpcsecurity.Security, logger *slog.Logger) (nodeBinding, error) {
	if !cfg.NodeBound {
		return nodeBinding{}, nil
	}
	if !sec.Secure() {
		logger.Warn("IPAM_NODE_BOUND ignored: insecure mode, callers have no SPIFFE ID")
		return nodeBinding{}, nil
	}
	unbound, err := spiffeauthz.IDCheck(cfg.UnboundIDs, sec.TrustDomain)
	if err != nil {
		return nodeBinding{}, fmt.Errorf("IPAM_UNBOUND_IDS: %w", err)
	}
	logger.Info("callers held to the node their SPIFFE ID names", "unboundIDs", cfg.UnboundIDs)
	return nodeBinding{ipam.NewCallerNodes(unbound, logger)}, nil
}

func (n nodeBinding) options() []grpc.ServerOption {
	if n.c == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(n.c.UnaryInterceptor())}
}

func (n nodeBinding) register(reg *prometheus.Registry) {
	if n.c != nil {
		reg.MustRegister(n.c)
	}
}
