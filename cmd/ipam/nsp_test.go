package main

import (
	"context"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
)

func allocate(t *testing.T, c ipamv1.IpamClient, conduit string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := c.Allocate(ctx, childID{ipamv1.IPFamily_IPV4, conduit, "worker", "bridge"}.req())
	require.NoError(t, err)
	return p.GetAddress()
}

// TestFollowsNSPConduits: the binary serves while the configuration server
// is down; a conduit the server drops is drained (held addresses renewed,
// new ones refused with FailedPrecondition, its subnet not reused) and
// revived whole when it comes back.
func TestFollowsNSPConduits(t *testing.T) {
	bin := testIPAM(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close()) // down for now

	p := startIPAM(t, bin, "IPAM_DATASOURCE="+filepath.Join(t.TempDir(), "registry.db"), "IPAM_NSP_SERVICE="+addr)
	assert.Equal(t, "169.255.0.1", allocate(t, p.client, "a"), "served with the NSP down")
	assert.Equal(t, "169.255.16.1", allocate(t, p.client, "b"))
	require.Eventually(t, func() bool { return p.logged("watch failed; keeping the last list and retrying") > 0 }, 30*time.Second, 20*time.Millisecond)

	nsp, srv := testutil.ServeFakeNSP(t, addr, 0)
	defer srv.Stop()

	nsp.Conduits <- testutil.ConduitList("default", "a", "b")
	nsp.Conduits <- testutil.ConduitList("default", "a")
	require.Eventually(t, func() bool { return p.logged("conduit list applied") > 0 }, 30*time.Second, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = p.client.Allocate(ctx, childID{ipamv1.IPFamily_IPV4, "b", "worker", "t-src"}.req())
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "not in the configuration")
	assert.Equal(t, "169.255.16.1", allocate(t, p.client, "b"), "held address renewed")
	assert.Equal(t, "169.255.32.1", allocate(t, p.client, "c"), "b's subnet is not handed out")
	nsp.Conduits <- testutil.ConduitList("default", "a", "b")
	require.Eventually(t, func() bool { return p.logged("conduit revived") > 0 }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, "169.255.16.1", allocate(t, p.client, "b"))
	assert.Equal(t, "169.255.0.1", allocate(t, p.client, "a"))
	assert.NoError(t, p.kill(t, syscall.SIGTERM))
}
