package ipam

import (
	"context"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// CallerNodes holds each caller of Allocate and Release to its own node:
// the node its SPIFFE ID names in its last two path segments,
// .../node/<name> (the ID a ClusterSPIFFEID template gives the proxies,
// docs/security.md). A call whose Subnet.node is another node, or from a
// caller whose ID names none, is refused with PermissionDenied, counted
// (causeway_ipam_node_refusals_total) and logged once per (caller, node)
// before the engine sees it. Callers that unbound admits (the IPAM's own
// replicas, forwarding calls they checked themselves) are not held.
type CallerNodes struct {
	unbound  func(spiffeid.ID) error
	refusals *limits.Refusals
}

// NewCallerNodes returns the check; unbound (nil: none) admits the callers
// not held to a node (spiffeauthz.IDCheck: nil error for those).
func NewCallerNodes(unbound func(spiffeid.ID) error, log *slog.Logger) *CallerNodes {
	return &CallerNodes{unbound: unbound, refusals: limits.NewNamed(metricsNamespace, "node_refusals_total",
		"Allocate and Release calls refused for a node that is not the caller's, by rule (no_node: the caller's ID names none; other_node).",
		"IPAM call refused: a caller may allocate and release only for its own node (logged once per caller and node)", log)}
}

// UnaryInterceptor checks Allocate and Release; other methods pass.
func (c *CallerNodes) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if child, ok := req.(*ipamv1.Child); ok {
			if err := c.check(ctx, info.FullMethod, child); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

// check refuses a call for another node than the caller's.
func (c *CallerNodes) check(ctx context.Context, method string, child *ipamv1.Child) error {
	id, err := spiffeauthz.CallerID(ctx)
	if err != nil {
		return status.Errorf(codes.PermissionDenied, "%s: the caller's node is not known: %v", method, err)
	}
	if c.unbound != nil && c.unbound(id) == nil {
		return nil
	}
	want := child.GetSubnet().GetNode()
	node, ok := NodeOfID(id)
	switch {
	case !ok:
		c.refusals.Deny("no_node", id.String()+" "+want, "caller", id.String(), "node", want, "method", method)
		return status.Errorf(codes.PermissionDenied, "%s: caller %s names no node (its ID does not end in /node/<name>): it may not allocate nor release for node %q", method, id, want)
	case node != want:
		c.refusals.Deny("other_node", id.String()+" "+want, "caller", id.String(), "callerNode", node, "node", want, "method", method)
		return status.Errorf(codes.PermissionDenied, "%s: caller %s of node %s may not allocate nor release for node %q", method, id, node, want)
	}
	return nil
}

// NodeOfID is the node an ID names: <name> of a path that ends in
// /node/<name>.
func NodeOfID(id spiffeid.ID) (string, bool) {
	segs := strings.Split(id.Path(), "/")
	if n := len(segs); n >= 3 && segs[n-2] == "node" && segs[n-1] != "" {
		return segs[n-1], true
	}
	return "", false
}

// Describe implements prometheus.Collector.
func (c *CallerNodes) Describe(ch chan<- *prometheus.Desc) { c.refusals.Describe(ch) }

// Collect implements prometheus.Collector.
func (c *CallerNodes) Collect(ch chan<- prometheus.Metric) { c.refusals.Collect(ch) }

// Count is the refusals by rule so far (no_node, other_node).
func (c *CallerNodes) Count(rule string) int { return c.refusals.Count(rule) }
