//go:build apiserver

package ipamd

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/apiservertest"
	"github.com/causeway-net/causeway/pkg/ipam/leader"
)

// forwardingReplica is an ipam process whose API connections go through a
// proxy the test can cut.
type forwardingReplica struct {
	runningReplica
	proxy *apiservertest.Proxy
}

// kill ends the replica as a crash would for the others: its API
// connections are cut first (it neither flushes nor releases the Lease).
func (r forwardingReplica) kill(t *testing.T) {
	r.proxy.Cut()
	_ = r.stop()
}

// Three ipam processes with IPAM_LEADER_ADDRESS, as the chart runs them:
// every replica is ready (the standbys forward to the leader), a call
// through any of them is served by the leader, and after the leader is
// killed the calls through the others are served again by the next one,
// every child keeping its address and no address handed out twice.
func TestRunReplicasForwardToTheLeader(t *testing.T) {
	api := startAPI(t)

	var rs []forwardingReplica
	for range 3 {
		cfg := testConfig(t)
		proxy := apiservertest.NewProxy(t, api.Host)
		cfg.Store, cfg.Kubeconfig, cfg.KubeNamespace = StoreKubernetes, kubeconfig(t, api, "https://"+proxy.Addr), "default"
		// The identity is the port: the address template finds the leader
		// on 127.0.0.1 (the chart's finds a pod through its DNS name).
		cfg.Identity, cfg.LeaderAddress = strconv.Itoa(cfg.Port), "127.0.0.1:"+leader.IdentityPlaceholder
		cfg.LeaderLeaseDuration = 3 * time.Second
		client, conn, stop := start(t, cfg)
		rs = append(rs, forwardingReplica{runningReplica{client, conn, stop}, proxy})
	}
	for i, r := range rs {
		waitHealthy(t, r.runningReplica, "ipam.v1.Ipam", fmt.Sprintf("replica %d ready", i))
	}
	first := -1
	for i, r := range rs {
		if r.healthy(t, leader.HealthService) {
			require.Equal(t, -1, first, "one leader")
			first = i
		}
	}
	require.NotEqual(t, -1, first, "a leader")

	held := map[string]string{} // child → address
	owner := map[string]string{}
	keep := func(child, addr string) {
		t.Helper()
		if o, ok := owner[addr]; ok {
			require.Equal(t, child, o, "address %s handed out twice", addr)
		}
		if a, ok := held[child]; ok {
			require.Equal(t, a, addr, "child %s moved", child)
		}
		owner[addr], held[child] = child, addr
	}
	for i, r := range rs {
		for j := range 4 {
			child := fmt.Sprintf("c%d-%d", i, j)
			keep(child, allocateChild(t, r.client, child))
		}
	}
	// The same child through another replica: the same address.
	for child, addr := range held {
		assert.Equal(t, addr, allocateChild(t, rs[(first+1)%3].client, child))
	}

	killed := time.Now()
	rs[first].kill(t)
	others := []forwardingReplica{rs[(first+1)%3], rs[(first+2)%3]}
	// Through a standby of the moment: refused (Unavailable) until the next
	// leader serves, then served.
	var addr string
	var err error
	deadline := time.Now().Add(time.Minute)
	for {
		addr, err = tryAllocate(others[0].client, "after-kill")
		if err == nil {
			break
		}
		require.Equal(t, codes.Unavailable, status.Code(err), "refused as Unavailable during the failover: %v", err)
		require.True(t, time.Now().Before(deadline), "no replica serves a minute after the leader was killed")
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("FIGURE: IPAM failover through a replica (leader killed, Lease 3s) → next allocation served: %s\n", time.Since(killed).Round(time.Millisecond))
	keep("after-kill", addr)
	for _, r := range others {
		waitHealthy(t, r.runningReplica, "ipam.v1.Ipam", "ready after the failover")
		for child, addr := range held {
			assert.Equal(t, addr, allocateChild(t, r.client, child), "child %s keeps its address", child)
		}
		for j := range 4 {
			child := fmt.Sprintf("after-%d", j)
			keep(child, allocateChild(t, r.client, child))
		}
	}
	for _, r := range others {
		require.NoError(t, r.stop())
	}
}

// waitHealthy waits until r says service is SERVING (a minute guards
// against never).
func waitHealthy(t *testing.T, r runningReplica, service, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !r.healthy(t, service) {
		require.True(t, time.Now().Before(deadline), what)
		time.Sleep(20 * time.Millisecond)
	}
}

// tryAllocate allocates child on node worker of conduit a (waiting for the
// replica to listen).
func tryAllocate(c ipamv1.IpamClient, child string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	p, err := c.Allocate(ctx, &ipamv1.Child{Name: child, Subnet: &ipamv1.Subnet{
		Conduit: &nspv1.Conduit{Name: "a", Trench: &nspv1.Trench{Name: "default"}}, Node: "worker", IpFamily: ipamv1.IPFamily_IPV4,
	}}, grpc.WaitForReady(true))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%d", p.GetAddress(), p.GetPrefixLength()), nil
}

func allocateChild(t *testing.T, c ipamv1.IpamClient, child string) string {
	t.Helper()
	addr, err := tryAllocate(c, child)
	require.NoError(t, err, "allocate %s", child)
	return addr
}
