//go:build apiserver

package leader

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

const callers = 64

// fullLengthEnv, when set, runs the scenarios at full length: the serving
// replica killed every 10 s for two minutes and cut from the API server for
// 30 s. Unset (as in make test-apiserver), they run shortened: killed every
// 5 s five times, cut for 10 s.
const fullLengthEnv = "CAUSEWAY_IPAM_FAILOVER_FULL"

// lengths are the scenarios' lengths: how often and how many times the
// serving replica is killed, and how long it is cut from the API server.
func lengths() (killEvery time.Duration, kills int, cut time.Duration) {
	if os.Getenv(fullLengthEnv) != "" {
		return 10 * time.Second, 12, 30 * time.Second
	}
	return 5 * time.Second, 5, 10 * time.Second
}

// probe allocates a new child through the replicas and returns when one
// acknowledged it.
func probe(t *testing.T, c *cluster, l *ledger, name string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p *ipamv1.Prefix
	err := c.do(ctx, func(ctx context.Context, g *Gate) (err error) {
		p, err = g.Allocate(ctx, child("probe", name))
		return err
	})
	if err != nil {
		t.Fatalf("no replica served %s within a minute: %v", name, err)
	}
	l.acked(name, p)
	return time.Now()
}

// scenario starts three replicas and the callers, runs disrupt while they
// call, stops them and verifies every reply and the store.
func scenario(t *testing.T, disrupt func(t *testing.T, api *apiServer, c *cluster, l *ledger)) {
	api := &apiServer{startAPI(t)}
	c := &cluster{}
	for i := range 3 {
		c.add(startReplica(t, api.Server, fmt.Sprintf("ipam-%d", i)))
	}
	l := newLedger()
	probe(t, c, l, "probe-start")
	ctx, cancel := context.WithCancel(context.Background())
	wg := load(ctx, c, l, callers)
	disrupt(t, api, c, l)
	time.Sleep(2 * time.Second) // the callers run a while after the last disruption
	cancel()
	wg.Wait()
	verify(t, api.Server, l)
}

// The serving replica is killed (its API connections cut, then stopped)
// every 5 s, five times (every 10 s for two minutes at full length, see
// fullLengthEnv), while 64 callers allocate, renew and release; a new
// replica takes its place each time.
func TestServingReplicaKilledRepeatedly(t *testing.T) {
	every, kills, _ := lengths()
	scenario(t, func(t *testing.T, api *apiServer, c *cluster, l *ledger) {
		var took []time.Duration
		for k := range kills {
			time.Sleep(every)
			r := waitLeader(t, c)
			c.remove(r)
			start := time.Now()
			r.kill()
			c.add(startReplica(t, api.Server, fmt.Sprintf("ipam-new-%d", k)))
			took = append(took, probe(t, c, l, fmt.Sprintf("probe-kill-%d", k)).Sub(start))
		}
		figures(t, fmt.Sprintf("IPAM failover, serving replica killed %d times every %s (lease %s, %d callers), to the next new allocation served", kills, every, leaseDuration, callers), took)
	})
}

// The serving replica's connections to the API server are cut for 10 s
// (30 s at full length; not its callers'): it must stop serving, another
// must serve, and after the cut it serves nothing from its old view.
func TestServingReplicaCutFromAPIServer(t *testing.T) {
	_, _, cut := lengths()
	scenario(t, func(t *testing.T, api *apiServer, c *cluster, l *ledger) {
		time.Sleep(3 * time.Second)
		r := waitLeader(t, c)
		start := time.Now()
		r.proxy.Cut()
		stoppedAt := make(chan time.Time, 1)
		go func() {
			deadline := time.Now().Add(time.Minute)
			for r.gate.Serving() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			stoppedAt <- time.Now()
		}()
		served := probe(t, c, l, "probe-cut")
		stopped := (<-stoppedAt).Sub(start)
		if r.gate.Serving() {
			t.Fatal("the replica cut from the API server still serves a minute later")
		}
		time.Sleep(time.Until(start.Add(cut)))
		r.proxy.Heal()
		figures(t, fmt.Sprintf("IPAM serving replica cut from the API server for %s (lease %s): to the next new allocation served", cut, leaseDuration), []time.Duration{served.Sub(start)})
		figures(t, "IPAM serving replica cut from the API server: until it stops serving", []time.Duration{stopped})
	})
}

// The API server is stopped for 5 s and started again.
func TestAPIServerRestarted(t *testing.T) {
	scenario(t, func(t *testing.T, api *apiServer, c *cluster, l *ledger) {
		outage(t, c, l, api.StopAPIServer, api.StartAPIServer, "IPAM after an API server restart: from ready to the next new allocation served")
	})
}

// etcd is stopped for 5 s and started again.
func TestEtcdRestarted(t *testing.T) {
	scenario(t, func(t *testing.T, api *apiServer, c *cluster, l *ledger) {
		outage(t, c, l, api.StopEtcd, api.StartEtcd, "IPAM after an etcd restart: from etcd healthy to the next new allocation served")
	})
}

// outage stops a process for 5 s, starts it again and reports the time
// from its return to the next new allocation served.
func outage(t *testing.T, c *cluster, l *ledger, stop, start func(), figure string) {
	time.Sleep(3 * time.Second)
	stop()
	time.Sleep(5 * time.Second)
	start()
	back := time.Now()
	figures(t, figure, []time.Duration{probe(t, c, l, "probe-outage").Sub(back)})
}

// waitLeader returns the serving replica, waiting for one (a minute guards
// against none ever).
func waitLeader(t *testing.T, c *cluster) *replica {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if r := c.serving(); r != nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatal("no replica serves")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
