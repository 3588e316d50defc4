package ipam

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

// Server adapts an Engine to the ipam.v1.Ipam gRPC service and maps the
// engine's typed errors to status codes.
type Server struct {
	ipamv1.UnimplementedIpamServer
	engine *Engine
}

// NewServer returns the gRPC service of e.
func NewServer(e *Engine) *Server {
	return &Server{engine: e}
}

// Allocate implements ipam.v1.Ipam.
func (s *Server) Allocate(ctx context.Context, c *ipamv1.Child) (*ipamv1.Prefix, error) {
	sub, err := subnetOf(c)
	if err != nil {
		return nil, toStatus(err)
	}
	p, err := s.engine.Allocate(ctx, sub, c.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &ipamv1.Prefix{Address: p.Addr().String(), PrefixLength: int32(p.Bits())}, nil
}

// Release implements ipam.v1.Ipam.
func (s *Server) Release(ctx context.Context, c *ipamv1.Child) (*emptypb.Empty, error) {
	sub, err := subnetOf(c)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := s.engine.Release(ctx, sub, c.GetName()); err != nil {
		return nil, toStatus(err)
	}
	return &emptypb.Empty{}, nil
}

func subnetOf(c *ipamv1.Child) (Subnet, error) {
	sn := c.GetSubnet()
	if sn == nil {
		return Subnet{}, fmt.Errorf("%w: subnet is missing", ErrInvalidArgument)
	}
	if sn.GetConduit() == nil {
		return Subnet{}, fmt.Errorf("%w: conduit is missing", ErrInvalidArgument)
	}
	if sn.GetConduit().GetTrench() == nil {
		return Subnet{}, fmt.Errorf("%w: trench is missing", ErrInvalidArgument)
	}
	var f Family
	switch sn.GetIpFamily() {
	case ipamv1.IPFamily_IPV4:
		f = IPv4
	case ipamv1.IPFamily_IPV6:
		f = IPv6
	default:
		return Subnet{}, fmt.Errorf("%w: unknown ipFamily %d", ErrInvalidArgument, int32(sn.GetIpFamily()))
	}
	return Subnet{
		Trench:  sn.GetConduit().GetTrench().GetName(),
		Conduit: sn.GetConduit().GetName(),
		Node:    sn.GetNode(),
		Family:  f,
	}, nil
}

// toStatus maps an engine error to a gRPC status.
func toStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, ErrInvalidArgument):
		code = codes.InvalidArgument
	case errors.Is(err, ErrNotServed), errors.Is(err, ErrDraining):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrExhausted):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Error(code, err.Error())
}

// RPCMetrics counts gRPC requests and their latency by method and code.
type RPCMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewRPCMetrics returns unregistered RPC metrics.
func NewRPCMetrics() *RPCMetrics {
	return &RPCMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "rpc_requests_total",
			Help: "gRPC requests handled, by method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "rpc_duration_seconds",
			Help:    "gRPC request latency, by method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 4, 9),
		}, []string{"method", "code"}),
	}
}

// Describe implements prometheus.Collector.
func (m *RPCMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.latency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *RPCMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.latency.Collect(ch)
}

// UnaryInterceptor records every unary call.
func (m *RPCMetrics) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		code := status.Code(err).String()
		m.requests.WithLabelValues(info.FullMethod, code).Inc()
		m.latency.WithLabelValues(info.FullMethod, code).Observe(time.Since(start).Seconds())
		return resp, err
	}
}
