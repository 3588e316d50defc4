package ipam

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
)

func TestSyncConduits(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			open := sc.open(t)
			st := open()
			e, err := New(context.Background(), st, baseConfig())
			require.NoError(t, err)
			for _, c := range []string{"a", "b", "c"} {
				alloc(t, e, sub(IPv4, c, "w1"), "bridge")
				alloc(t, e, sub(IPv6, c, "w1"), "bridge")
			}
			e.Close()
			require.NoError(t, closeIfBolt(st))

			st = open()
			e = newEngine(t, st, baseConfig())
			// Until the server answers, nothing is removed. The first list
			// removes the conduits that vanished while the IPAM was down.
			assert.Equal(t, 4, e.SyncConduits([]string{"a", "x"}), "b and c removed in both families")
			for _, f := range []Family{IPv4, IPv6} {
				assert.True(t, e.hasConduit(f, "a"))
				assert.False(t, e.hasConduit(f, "b"))
				assert.False(t, e.hasConduit(f, "c"))
			}
			require.NoError(t, e.Sync(context.Background()))
			for _, k := range storedKeys(t, st) {
				assert.NotRegexp(t, "\x00[bc](\x00|=)", k, "conduits b and c removed from the store")
			}
			// A conduit created by Allocate that the server never listed is kept.
			alloc(t, e, sub(IPv4, "d", "w1"), "bridge")
			assert.Equal(t, 0, e.SyncConduits([]string{"a", "x"}))
			assert.True(t, e.hasConduit(IPv4, "d"))
			// One that the server lists (x, before it was created) goes when dropped.
			alloc(t, e, sub(IPv4, "x", "w1"), "bridge")
			assert.Equal(t, 0, e.SyncConduits([]string{"a", "x", "d"}))
			assert.Equal(t, 2, e.SyncConduits([]string{"a"}), "x and d removed")
			assert.False(t, e.hasConduit(IPv4, "x"))
			assert.False(t, e.hasConduit(IPv4, "d"))
			assert.Equal(t, "169.255.16.1/24", alloc(t, e, sub(IPv4, "new", "w1"), "bridge"), "freed conduit prefix reused first fit")
		})
	}
}

// fakeNSP is a ConfigurationManager whose WatchConduit fails the first
// `fail` calls, then streams the lists sent on `lists` until the stream's
// end is requested on `hangup`.
type fakeNSP struct {
	nspv1.UnimplementedConfigurationManagerServer
	mu     sync.Mutex
	calls  int
	fail   int
	trench string
	lists  chan []string
	hangup chan struct{}
}

func (f *fakeNSP) WatchConduit(req *nspv1.Conduit, stream nspv1.ConfigurationManager_WatchConduitServer) error {
	f.mu.Lock()
	f.calls++
	failing := f.calls <= f.fail
	f.trench = req.GetTrench().GetName()
	f.mu.Unlock()
	if failing {
		return status.Error(codes.Unavailable, "not ready")
	}
	for {
		select {
		case names := <-f.lists:
			resp := &nspv1.ConduitResponse{}
			for _, n := range names {
				resp.Conduits = append(resp.Conduits, &nspv1.Conduit{Name: n, Trench: &nspv1.Trench{Name: testTrench}})
			}
			// A conduit of another trench is ignored.
			resp.Conduits = append(resp.Conduits, &nspv1.Conduit{Name: "b", Trench: &nspv1.Trench{Name: "other"}})
			if err := stream.Send(resp); err != nil {
				return err
			}
		case <-f.hangup:
			return status.Error(codes.Unavailable, "restarting")
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (f *fakeNSP) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func startNSP(t *testing.T, f *fakeNSP) nspv1.ConfigurationManagerClient {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	nspv1.RegisterConfigurationManagerServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return nspv1.NewConfigurationManagerClient(conn)
}

func TestConduitWatcher(t *testing.T) {
	st := stores[1].open(t)()
	e := newEngine(t, st, baseConfig())
	for _, c := range []string{"a", "b", "c"} {
		alloc(t, e, sub(IPv4, c, "w1"), "bridge")
	}
	nsp := &fakeNSP{fail: 3, lists: make(chan []string), hangup: make(chan struct{})}
	client := startNSP(t, nsp)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &ConduitWatcher{Client: client, Trench: testTrench, Syncer: e, MaxBackoff: 200 * time.Millisecond, Logger: quietLogger()}
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	// Failing server: retried, and nothing is removed meanwhile.
	require.Eventually(t, func() bool { return nsp.callCount() > 3 }, 20*time.Second, 10*time.Millisecond)
	for _, c := range []string{"a", "b", "c"} {
		assert.True(t, e.hasConduit(IPv4, c))
	}
	nsp.mu.Lock()
	assert.Equal(t, testTrench, nsp.trench, "the watch filters by trench")
	nsp.mu.Unlock()

	// c was created by Allocate and never listed: kept by the first list.
	nsp.lists <- []string{"a", "b"}
	nsp.lists <- []string{"a", "b"} // the second send returns once the first is applied
	assert.True(t, e.hasConduit(IPv4, "c"))
	nsp.lists <- []string{"a", "c"}
	require.Eventually(t, func() bool { return !e.hasConduit(IPv4, "b") }, 20*time.Second, 10*time.Millisecond)
	assert.True(t, e.hasConduit(IPv4, "a"))
	assert.True(t, e.hasConduit(IPv4, "c"))

	// Stream ends: the watcher reconnects and follows the new stream.
	calls := nsp.callCount()
	nsp.hangup <- struct{}{}
	require.Eventually(t, func() bool { return nsp.callCount() > calls }, 20*time.Second, 10*time.Millisecond)
	nsp.lists <- []string{"c"}
	require.Eventually(t, func() bool { return !e.hasConduit(IPv4, "a") }, 20*time.Second, 10*time.Millisecond)
	assert.True(t, e.hasConduit(IPv4, "c"))
	require.NoError(t, e.Sync(context.Background()))
	for _, k := range storedKeys(t, st) {
		assert.NotContains(t, k, "\x00a\x00", "conduit a's nodes removed from the store")
	}
}
