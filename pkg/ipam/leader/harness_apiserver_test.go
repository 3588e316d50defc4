//go:build apiserver

package leader

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/apiservertest"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/kube"
)

const (
	testNS        = "default"
	testTrench    = "blue"
	leaseDuration = 3 * time.Second
)

// apiServer is the test's API server.
type apiServer struct{ *apiservertest.Server }

// startAPI starts an API server with the IPAM's CRDs.
func startAPI(t *testing.T) *apiservertest.Server {
	t.Helper()
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, etcd := apiservertest.Require(t, root)
	s := apiservertest.Start(t, bin, etcd)
	s.InstallCRDs(filepath.Join(root, "deployments/helm/causeway/crds/ipam.causeway.net.yaml"))
	return s
}

func engineConfig(log *slog.Logger) ipam.Config {
	return ipam.Config{
		Trench: testTrench, IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("172.16.0.0/16"), ConduitLength: 20, NodeLength: 24},
		LeaseFlushInterval: time.Second, Logger: log,
	}
}

// replica is one IPAM replica, reaching the API server through a proxy of
// its own that the test can cut.
type replica struct {
	id     string
	gate   *Gate
	proxy  *apiservertest.Proxy
	cancel context.CancelFunc
	done   chan struct{}
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("CAUSEWAY_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

func startReplica(t *testing.T, api *apiservertest.Server, id string) *replica {
	t.Helper()
	r := &replica{id: id, gate: &Gate{}, proxy: apiservertest.NewProxy(t, api.Host), done: make(chan struct{})}
	rc := rest.CopyConfig(api.Config)
	rc.Host = "https://" + r.proxy.Addr
	records, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := coordinationv1.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	log := testLogger(t).With("replica", id)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		if err := Elect(ctx, Config{
			Leases: leases, Records: records, Namespace: testNS, LeaseName: "ipam-" + testTrench, Identity: id,
			LeaseDuration: leaseDuration, Engine: engineConfig(log), Gate: r.gate, Retry: 200 * time.Millisecond, Logger: log,
		}); err != nil {
			t.Errorf("replica %s: %v", id, err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// kill ends the replica as a crash would: its connections to the API
// server are cut first, so that it neither flushes nor releases the Lease.
func (r *replica) kill() {
	r.proxy.Cut()
	r.stop()
}

// stop ends the replica cleanly (it flushes and releases the Lease).
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// cluster is the replicas, called as through a Service: a call goes to one
// replica, and to the next while they answer Unavailable.
type cluster struct {
	mu       sync.Mutex
	replicas []*replica
	next     atomic.Uint64
}

func (c *cluster) add(r *replica) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicas = append(c.replicas, r)
}

func (c *cluster) remove(r *replica) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicas = slices.DeleteFunc(c.replicas, func(x *replica) bool { return x == r })
}

// serving returns the replica that serves now, or nil.
func (c *cluster) serving() *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.replicas {
		if r.gate.Serving() {
			return r
		}
	}
	return nil
}

func (c *cluster) pick() *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas[int(c.next.Add(1))%len(c.replicas)]
}

// do calls f on replicas in turn until one does not answer Unavailable (or
// ctx ends): the proxies' retries.
func (c *cluster) do(ctx context.Context, f func(context.Context, *Gate) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := f(cctx, c.pick().gate)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if s := status.Code(err); s != codes.Unavailable && s != codes.DeadlineExceeded && s != codes.Canceled {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func child(node, name string) *ipamv1.Child {
	return &ipamv1.Child{Name: name, Subnet: &ipamv1.Subnet{
		Conduit:  &nspv1.Conduit{Name: "load", Trench: &nspv1.Trench{Name: testTrench}},
		Node:     node,
		IpFamily: ipamv1.IPFamily_IPV4,
	}}
}

// ledger checks every reply: an acknowledged address is held by one child
// at a time, and a child keeps its address until it releases it.
type ledger struct {
	mu       sync.Mutex
	holder   map[netip.Addr]string
	addrOf   map[string]netip.Addr
	acks     int
	problems []string
	lastAck  time.Time
}

func newLedger() *ledger {
	return &ledger{holder: map[netip.Addr]string{}, addrOf: map[string]netip.Addr{}}
}

func (l *ledger) acked(name string, p *ipamv1.Prefix) {
	a := netip.MustParseAddr(p.GetAddress())
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks++
	l.lastAck = time.Now()
	if h, ok := l.holder[a]; ok && h != name {
		l.problems = append(l.problems, fmt.Sprintf("%s handed to %s while %s holds it", a, name, h))
	}
	if old, ok := l.addrOf[name]; ok && old != a {
		l.problems = append(l.problems, fmt.Sprintf("%s had %s, now %s: an acknowledged allocation was lost", name, old, a))
		delete(l.holder, old)
	}
	l.holder[a], l.addrOf[name] = name, a
}

// releasing forgets a child before its release is sent: from then on its
// address may be handed out again.
func (l *ledger) releasing(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, ok := l.addrOf[name]; ok {
		delete(l.holder, a)
		delete(l.addrOf, name)
	}
}

func (l *ledger) since(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastAck.After(t)
}

// load runs callers that each hold a few children on one of 8 nodes,
// allocating new ones, renewing and releasing at random, until ctx ends.
func load(ctx context.Context, c *cluster, l *ledger, callers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			node := fmt.Sprintf("worker%d", i%8)
			var held []string
			for n := 0; ctx.Err() == nil; n++ {
				switch {
				case len(held) < 4 || (r.IntN(3) == 0 && len(held) < 8):
					name := fmt.Sprintf("c%d-%d", i, n)
					var p *ipamv1.Prefix
					if c.do(ctx, func(ctx context.Context, g *Gate) (err error) {
						p, err = g.Allocate(ctx, child(node, name))
						return err
					}) == nil {
						l.acked(name, p)
						held = append(held, name)
					}
				case r.IntN(2) == 0:
					name := held[r.IntN(len(held))]
					var p *ipamv1.Prefix
					if c.do(ctx, func(ctx context.Context, g *Gate) (err error) {
						p, err = g.Allocate(ctx, child(node, name))
						return err
					}) == nil {
						l.acked(name, p)
					}
				default:
					k := r.IntN(len(held))
					name := held[k]
					l.releasing(name)
					if c.do(ctx, func(ctx context.Context, g *Gate) error { _, err := g.Release(ctx, child(node, name)); return err }) == nil {
						held = slices.Delete(held, k, k+1)
					}
				}
			}
		}()
	}
	return &wg
}

// verify checks the ledger, and that the store holds every child the
// ledger says is held, at its address, and no address twice.
func verify(t *testing.T, api *apiservertest.Server, l *ledger) {
	t.Helper()
	for _, p := range l.problems {
		t.Error(p)
	}
	records, err := dynamic.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kube.Open(context.Background(), kube.Options{Client: records, Namespace: testNS, Trench: testTrench, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]netip.Addr{}
	owner := map[netip.Addr]string{}
	for _, r := range recs {
		if r.Key.Level != store.LevelChild {
			continue
		}
		if o, ok := owner[r.Prefix.Addr()]; ok {
			t.Errorf("the store holds %s for %s and %s", r.Prefix.Addr(), o, r.Key.Child)
		}
		owner[r.Prefix.Addr()] = r.Key.Child
		stored[r.Key.Child] = r.Prefix.Addr()
	}
	for name, a := range l.addrOf {
		if stored[name] != a {
			t.Errorf("%s was acknowledged %s; the store has %v", name, a, stored[name])
		}
	}
	t.Logf("%d replies checked, %d children held at the end, %d stored", l.acks, len(l.addrOf), len(stored))
}

// waitServing waits until some replica serves and a call is acknowledged
// after from; it returns when. The minute is a guard against "never".
func waitServed(t *testing.T, l *ledger, from time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !l.since(from) {
		if time.Now().After(deadline) {
			t.Fatalf("no allocation served within a minute of %s", from.Format(time.TimeOnly))
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastAck
}

func figures(t *testing.T, what string, ds []time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	fmt.Printf("FIGURE: %s: min %s, median %s, max %s (%d times)\n", what,
		ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
}
