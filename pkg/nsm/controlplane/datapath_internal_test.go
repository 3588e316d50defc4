package controlplane

import (
	"context"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/stretchr/testify/require"
)

// TestDataPathFirst: while the connection's interface is up, the check
// says alive whatever the NSMgr says, for dataPathPatience from the first
// check of a heal; then the NSMgr's word decides. A connection established
// again starts afresh; without its interface the NSMgr's word decides.
func TestDataPathFirst(t *testing.T) {
	now := time.Unix(1000, 0)
	up := true
	d := newDataPathFirst(func(context.Context, *networkservice.Connection) bool { return false })
	d.up = func(*networkservice.Connection) bool { return up }
	d.now = func() time.Time { return now }
	conn := &networkservice.Connection{Id: "c"}
	ctx := context.Background()

	require.True(t, d.check(ctx, conn), "the interface is up: re-request as is")
	now = now.Add(dataPathPatience - time.Second)
	require.True(t, d.check(ctx, conn), "still within the patience")
	now = now.Add(time.Second)
	require.False(t, d.check(ctx, conn), "the heal went on for the patience: the NSMgr's word")

	client := chain.NewNetworkServiceClient(d)
	_, err := client.Request(ctx, &networkservice.NetworkServiceRequest{Connection: conn})
	require.NoError(t, err)
	require.True(t, d.check(ctx, conn), "established again: a new heal starts afresh")

	up = false
	require.False(t, d.check(ctx, conn), "no interface: the NSMgr's word")
}
