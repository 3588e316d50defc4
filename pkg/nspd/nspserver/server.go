// Package nspserver serves nsp.v1.ConfigurationManager (WatchVip and
// WatchConduit) from an in-memory configuration that the caller replaces as a
// whole. A watch receives the full list of objects matching its filter at once
// and again whenever that list changes; each stream sends the latest state
// only, so a slow watcher neither blocks updates nor other watchers.
package nspserver

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
)

// Server implements nspv1.ConfigurationManagerServer. Its zero value is not
// usable; call New.
type Server struct {
	nspv1.UnimplementedConfigurationManagerServer
	logger *slog.Logger

	mu       sync.Mutex
	vips     []*nspv1.Vip
	conduits []*nspv1.Conduit
	changed  chan struct{} // closed and replaced by every Set
	closed   chan struct{} // closed by Close
	isClosed bool
	watchers map[string]int
}

// New returns a server with an empty configuration.
func New(logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	return &Server{
		logger:   logger,
		changed:  make(chan struct{}),
		closed:   make(chan struct{}),
		watchers: map[string]int{},
	}
}

// SetConfig replaces the served configuration. Watchers whose filtered list
// changes receive the new list.
func (s *Server) SetConfig(cfg *configfile.Config) {
	vips, conduits := ToProto(cfg)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vips, s.conduits = vips, conduits
	close(s.changed)
	s.changed = make(chan struct{})
}

// Close ends every open watch with codes.Unavailable, and every later one at
// once, so that grpc.Server.GracefulStop can complete.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isClosed {
		s.isClosed = true
		close(s.closed)
	}
}

// Watchers returns the number of open watch streams per kind ("vip",
// "conduit").
func (s *Server) Watchers() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.watchers))
	for k, v := range s.watchers {
		out[k] = v
	}
	return out
}

// WatchVip streams the VIPs that match filter: its name, trench name and
// address each match everything when unset.
func (s *Server) WatchVip(filter *nspv1.Vip, stream grpc.ServerStreamingServer[nspv1.VipResponse]) error {
	match := vipMatcher(filter)
	return watch(stream.Context(), s, "vip", filter, func(st *state) *nspv1.VipResponse {
		resp := &nspv1.VipResponse{}
		for _, v := range st.vips {
			if match(v) {
				resp.Vips = append(resp.Vips, v)
			}
		}
		return resp
	}, stream.Send)
}

// WatchConduit streams the conduits that match filter: its name and trench
// name each match everything when unset.
func (s *Server) WatchConduit(filter *nspv1.Conduit, stream grpc.ServerStreamingServer[nspv1.ConduitResponse]) error {
	return watch(stream.Context(), s, "conduit", filter, func(st *state) *nspv1.ConduitResponse {
		resp := &nspv1.ConduitResponse{}
		for _, c := range st.conduits {
			if matchName(filter.GetName(), c.GetName()) &&
				matchName(filter.GetTrench().GetName(), c.GetTrench().GetName()) {
				resp.Conduits = append(resp.Conduits, c)
			}
		}
		return resp
	}, stream.Send)
}

type state struct {
	vips     []*nspv1.Vip
	conduits []*nspv1.Conduit
}

// watch sends build(latest state) whenever it differs from what the stream
// last sent, until the client goes away or the server closes.
func watch[R proto.Message](ctx context.Context, s *Server, kind string, filter proto.Message,
	build func(*state) R, send func(R) error) error {
	s.mu.Lock()
	s.watchers[kind]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.watchers[kind]--
		s.mu.Unlock()
	}()
	log := s.logger.With("watch", kind, "filter", filter)
	log.Debug("watch opened")
	defer log.Debug("watch closed")

	var last R
	sent := false
	for {
		s.mu.Lock()
		st := &state{vips: s.vips, conduits: s.conduits}
		changed := s.changed
		s.mu.Unlock()

		resp := build(st)
		if !sent || !proto.Equal(resp, last) {
			if err := send(resp); err != nil {
				return err
			}
			last, sent = resp, true
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closed:
			return status.Error(codes.Unavailable, "configuration server is shutting down")
		case <-changed:
		}
	}
}

func matchName(want, got string) bool { return want == "" || want == got }

func vipMatcher(filter *nspv1.Vip) func(*nspv1.Vip) bool {
	want := filter.GetAddress()
	wantPrefix, wantErr := netip.ParsePrefix(want)
	return func(v *nspv1.Vip) bool {
		if !matchName(filter.GetName(), v.GetName()) ||
			!matchName(filter.GetTrench().GetName(), v.GetTrench().GetName()) {
			return false
		}
		if want == "" || want == v.GetAddress() {
			return true
		}
		got, err := netip.ParsePrefix(v.GetAddress())
		return wantErr == nil && err == nil && got == wantPrefix
	}
}

// ToProto converts a configuration to the nsp.v1 messages it serves, in file
// order. A port NAT carries the full VIP objects it names.
func ToProto(cfg *configfile.Config) ([]*nspv1.Vip, []*nspv1.Conduit) {
	if cfg == nil {
		return nil, nil
	}
	type key struct{ trench, name string }
	byName := map[key]*nspv1.Vip{}
	vips := make([]*nspv1.Vip, 0, len(cfg.VIPs))
	for _, v := range cfg.VIPs {
		pv := &nspv1.Vip{Name: v.Name, Address: v.Address, Trench: &nspv1.Trench{Name: v.Trench}}
		vips = append(vips, pv)
		byName[key{v.Trench, v.Name}] = pv
	}
	conduits := make([]*nspv1.Conduit, 0, len(cfg.Conduits))
	for _, c := range cfg.Conduits {
		pc := &nspv1.Conduit{Name: c.Name, Trench: &nspv1.Trench{Name: c.Trench}}
		for _, pn := range c.DestinationPortNats {
			ppn := &nspv1.Conduit_PortNat{Port: pn.Port, TargetPort: pn.TargetPort, Protocol: pn.Protocol}
			for _, name := range pn.VIPs {
				if v, ok := byName[key{c.Trench, name}]; ok {
					ppn.Vips = append(ppn.Vips, v)
				}
			}
			pc.DestinationPortNats = append(pc.DestinationPortNats, ppn)
		}
		conduits = append(conduits, pc)
	}
	return vips, conduits
}
