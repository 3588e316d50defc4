package ipamd

import (
	"sync"

	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam/leader"
)

// replicaHealth sets a replica's health: leader.HealthService is SERVING
// while its own engine serves (and its store commits); ipam.v1.Ipam, what
// readiness asks, while it serves or forwards to a leader that serves.
type replicaHealth struct {
	hs *grpchealth.Server

	mu                  sync.Mutex
	serving, forwarding bool
}

// setServing records whether this replica's engine serves.
func (h *replicaHealth) setServing(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.serving = ok
	h.updateLocked()
}

// setForwarding records whether the leader answers this standby.
func (h *replicaHealth) setForwarding(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forwarding = ok
	h.updateLocked()
}

// update sets the statuses from what was recorded.
func (h *replicaHealth) update() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.updateLocked()
}

func (h *replicaHealth) updateLocked() {
	h.hs.SetServingStatus(leader.HealthService, servingStatus(h.serving))
	h.hs.SetServingStatus(ipamv1.Ipam_ServiceDesc.ServiceName, servingStatus(h.serving || h.forwarding))
}

// servingStatus is the health status of ok.
func servingStatus(ok bool) healthpb.HealthCheckResponse_ServingStatus {
	if ok {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}
