package nspserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 20 * time.Second

// serve starts srv on a loopback port and returns a client to it.
func serve(t *testing.T, srv *Server) nspv1.ConfigurationManagerClient {
	t.Helper()
	gs := testutil.ServeGRPC(t, "", func(gs *grpc.Server) { nspv1.RegisterConfigurationManagerServer(gs, srv) })
	t.Cleanup(srv.Close) // before the server stops: it ends the watch streams
	return nspv1.NewConfigurationManagerClient(gs.Dial(t))
}

func mustParse(t *testing.T, doc string) *configfile.Config {
	t.Helper()
	cfg, err := configfile.Parse([]byte(doc))
	require.NoError(t, err)
	return cfg
}

const base = `
trenches: [{name: red}, {name: blue}]
vips:
  - {name: a, address: 20.0.0.1/32, trench: red}
  - {name: b, address: 2001:db8::1/128, trench: red}
  - {name: a, address: 30.0.0.1/32, trench: blue}
conduits:
  - name: lb
    trench: red
    destinationPortNats: [{port: 80, targetPort: 8080, protocol: tcp, vips: [a, b]}]
  - {name: lb, trench: blue}
  - {name: other, trench: blue}
`

type vipStream = grpc.ServerStreamingClient[nspv1.VipResponse]

func watchVip(t *testing.T, c nspv1.ConfigurationManagerClient, filter *nspv1.Vip) (vipStream, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.WatchVip(ctx, filter)
	require.NoError(t, err)
	return s, cancel
}

// recvVips receives one message and renders it as "trench/name=address".
func recvVips(t *testing.T, s vipStream) []string {
	t.Helper()
	type result struct {
		r   *nspv1.VipResponse
		err error
	}
	ch := make(chan result, 1)
	go func() { r, err := s.Recv(); ch <- result{r, err} }()
	select {
	case res := <-ch:
		require.NoError(t, res.err)
		out := []string{}
		for _, v := range res.r.GetVips() {
			out = append(out, fmt.Sprintf("%s/%s=%s", v.GetTrench().GetName(), v.GetName(), v.GetAddress()))
		}
		return out
	case <-time.After(waitFor):
		t.Fatal("no VipResponse")
		return nil
	}
}

func TestWatchVipFilters(t *testing.T) {
	srv := New(slog.New(slog.DiscardHandler))
	srv.SetConfig(mustParse(t, base))
	c := serve(t, srv)

	for _, tc := range []struct {
		name   string
		filter *nspv1.Vip
		want   []string
	}{
		{"nil filter fields match all", &nspv1.Vip{}, []string{"red/a=20.0.0.1/32", "red/b=2001:db8::1/128", "blue/a=30.0.0.1/32"}},
		{"trench", &nspv1.Vip{Trench: &nspv1.Trench{Name: "red"}}, []string{"red/a=20.0.0.1/32", "red/b=2001:db8::1/128"}},
		{"empty trench name", &nspv1.Vip{Trench: &nspv1.Trench{}}, []string{"red/a=20.0.0.1/32", "red/b=2001:db8::1/128", "blue/a=30.0.0.1/32"}},
		{"name", &nspv1.Vip{Name: "a"}, []string{"red/a=20.0.0.1/32", "blue/a=30.0.0.1/32"}},
		{"name and trench", &nspv1.Vip{Name: "a", Trench: &nspv1.Trench{Name: "blue"}}, []string{"blue/a=30.0.0.1/32"}},
		{"address in another spelling", &nspv1.Vip{Address: "2001:db8:0::1/128"}, []string{"red/b=2001:db8::1/128"}},
		{"unknown trench", &nspv1.Vip{Trench: &nspv1.Trench{Name: "green"}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := watchVip(t, c, tc.filter)
			assert.Equal(t, tc.want, recvVips(t, s))
		})
	}
}

func TestWatchVipUpdatesOnlyOnChange(t *testing.T) {
	srv := New(slog.New(slog.DiscardHandler))
	srv.SetConfig(mustParse(t, base))
	c := serve(t, srv)
	red, _ := watchVip(t, c, &nspv1.Vip{Trench: &nspv1.Trench{Name: "red"}})
	blue, _ := watchVip(t, c, &nspv1.Vip{Trench: &nspv1.Trench{Name: "blue"}})
	assert.Equal(t, []string{"red/a=20.0.0.1/32", "red/b=2001:db8::1/128"}, recvVips(t, red))
	assert.Equal(t, []string{"blue/a=30.0.0.1/32"}, recvVips(t, blue))

	// Only blue changes: red must not get a message. Red's next message is
	// the later red change, which proves that nothing came in between.
	srv.SetConfig(mustParse(t, strings.Replace(base, "30.0.0.1/32", "30.0.0.2/32", 1)))
	assert.Equal(t, []string{"blue/a=30.0.0.2/32"}, recvVips(t, blue))
	srv.SetConfig(mustParse(t, strings.Replace(base, "30.0.0.1/32", "30.0.0.2/32", 1))) // identical
	srv.SetConfig(mustParse(t, strings.Replace(base, "20.0.0.1/32", "20.0.0.9/32", 1)))
	assert.Equal(t, []string{"red/a=20.0.0.9/32", "red/b=2001:db8::1/128"}, recvVips(t, red))
	// blue went back to 30.0.0.1 with that last config.
	assert.Equal(t, []string{"blue/a=30.0.0.1/32"}, recvVips(t, blue))

	// Everything removed: an empty list is sent.
	srv.SetConfig(mustParse(t, "trenches: [{name: red}]"))
	assert.Equal(t, []string{}, recvVips(t, red))
	assert.Equal(t, []string{}, recvVips(t, blue))
}

func TestWatchConduit(t *testing.T) {
	srv := New(slog.New(slog.DiscardHandler))
	srv.SetConfig(mustParse(t, base))
	c := serve(t, srv)

	names := func(r *nspv1.ConduitResponse) []string {
		out := []string{}
		for _, cd := range r.GetConduits() {
			out = append(out, cd.GetTrench().GetName()+"/"+cd.GetName())
		}
		return out
	}
	for _, tc := range []struct {
		filter *nspv1.Conduit
		want   []string
	}{
		{&nspv1.Conduit{}, []string{"red/lb", "blue/lb", "blue/other"}},
		{&nspv1.Conduit{Trench: &nspv1.Trench{Name: "blue"}}, []string{"blue/lb", "blue/other"}},
		{&nspv1.Conduit{Name: "lb"}, []string{"red/lb", "blue/lb"}},
		{&nspv1.Conduit{Name: "lb", Trench: &nspv1.Trench{Name: "red"}}, []string{"red/lb"}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.WatchConduit(ctx, tc.filter)
		require.NoError(t, err)
		r, err := s.Recv()
		require.NoError(t, err)
		assert.Equal(t, tc.want, names(r), "filter %v", tc.filter)
		cancel()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.WatchConduit(ctx, &nspv1.Conduit{Name: "lb", Trench: &nspv1.Trench{Name: "red"}})
	require.NoError(t, err)
	r, err := s.Recv()
	require.NoError(t, err)
	require.Len(t, r.GetConduits(), 1)
	pn := r.GetConduits()[0].GetDestinationPortNats()
	require.Len(t, pn, 1)
	assert.Equal(t, uint32(80), pn[0].GetPort())
	assert.Equal(t, uint32(8080), pn[0].GetTargetPort())
	assert.Equal(t, "tcp", pn[0].GetProtocol())
	require.Len(t, pn[0].GetVips(), 2)
	assert.Equal(t, "2001:db8::1/128", pn[0].GetVips()[1].GetAddress())

	// A VIP change is not a conduit change unless a port NAT names the VIP.
	srv.SetConfig(mustParse(t, strings.Replace(base, "30.0.0.1/32", "30.0.0.2/32", 1)))
	srv.SetConfig(mustParse(t, strings.Replace(base, "20.0.0.1/32", "20.0.0.3/32", 1)))
	r, err = s.Recv()
	require.NoError(t, err)
	assert.Equal(t, "20.0.0.3/32", r.GetConduits()[0].GetDestinationPortNats()[0].GetVips()[0].GetAddress())
}

func TestSlowWatcherDoesNotBlockOthers(t *testing.T) {
	srv := New(slog.New(slog.DiscardHandler))
	c := serve(t, srv)
	big := func(gen int) *configfile.Config {
		cfg := &configfile.Config{Trenches: []configfile.Trench{{Name: "t"}}}
		for i := 0; i < 1500; i++ {
			cfg.VIPs = append(cfg.VIPs, configfile.VIP{
				Name: fmt.Sprintf("vip-%d-%d-with-a-long-name", gen, i), Trench: "t",
				Address: fmt.Sprintf("10.%d.%d.%d/32", gen, i/256, i%256),
			})
		}
		return cfg
	}
	srv.SetConfig(big(0))
	slow, _ := watchVip(t, c, &nspv1.Vip{})
	fast, _ := watchVip(t, c, &nspv1.Vip{})
	require.Len(t, recvVips(t, fast), 1500)
	// The slow watcher reads nothing while 40 large updates go out: its
	// flow-control window fills after a few. The fast one gets every one.
	const updates = 40
	for gen := 1; gen <= updates; gen++ {
		srv.SetConfig(big(gen))
		got := recvVips(t, fast)
		require.Len(t, got, 1500)
		require.Equal(t, fmt.Sprintf("t/vip-%d-0-with-a-long-name=10.%d.0.0/32", gen, gen), got[0])
	}
	// The slow watcher catches up with the latest state without receiving
	// every intermediate one.
	received := 0
	for {
		got := recvVips(t, slow)
		received++
		if got[0] == fmt.Sprintf("t/vip-%d-0-with-a-long-name=10.%d.0.0/32", updates, updates) {
			break
		}
	}
	t.Logf("slow watcher received %d messages", received)
	assert.Less(t, received, updates, "the slow watcher was sent every intermediate state")
}

func TestCancelAndClose(t *testing.T) {
	srv := New(slog.New(slog.DiscardHandler))
	srv.SetConfig(mustParse(t, base))
	c := serve(t, srv)
	s1, cancel1 := watchVip(t, c, &nspv1.Vip{})
	s2, _ := watchVip(t, c, &nspv1.Vip{})
	recvVips(t, s1)
	recvVips(t, s2)
	assert.Equal(t, 2, srv.Watchers()["vip"])

	cancel1()
	require.Eventually(t, func() bool { return srv.Watchers()["vip"] == 1 }, waitFor, 10*time.Millisecond)

	srv.Close()
	_, err := s2.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err))
	require.Eventually(t, func() bool { return srv.Watchers()["vip"] == 0 }, waitFor, 10*time.Millisecond)

	// A watch opened after Close ends at once, after the current list.
	s3, _ := watchVip(t, c, &nspv1.Vip{})
	recvVips(t, s3)
	_, err = s3.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err))
}
