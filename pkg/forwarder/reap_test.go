package forwarder

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanismtranslation"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/adapters"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
)

// endpointIn is the far end of the test's client chain: an endpoint whose
// kernel interface name goes in the namespace at netnsURL.
type endpointIn struct{ netnsURL, name string }

func (e endpointIn) Request(_ context.Context, request *networkservice.NetworkServiceRequest, _ ...grpc.CallOption) (*networkservice.Connection, error) {
	conn := request.GetConnection()
	conn.Mechanism = kernelMechanism(e.netnsURL, e.name)
	return conn, nil
}

func (endpointIn) Close(context.Context, *networkservice.Connection, ...grpc.CallOption) (*empty.Empty, error) {
	return &empty.Empty{}, nil
}

func kernelMechanism(netnsURL, name string) *networkservice.Mechanism {
	m := kernelmech.New(netnsURL)
	m.GetParameters()[kernelmech.InterfaceNameKey] = name
	return m
}

// openNetNS lists the descriptors of this process that hold namespace ino
// (by what they are, not by their paths: a namespace opened through its
// mount shows the mount's path).
func openNetNS(t *testing.T, ino uint64) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	var own unix.Stat_t
	require.NoError(t, unix.Stat("/proc/self/ns/net", &own))
	var out []string
	for _, fd := range fds {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc/self/fd", fd.Name()), &st) == nil && st.Dev == own.Dev && st.Ino == ino {
			out = append(out, fd.Name())
		}
	}
	return out
}

// TestDeadPodTakesItsLinks: the forwarder's server chain (begin, the
// reaper, the stash) and client chain (the veth element, the reaper's) join
// a client's and an endpoint's namespaces. When one of them loses its pod
// (its mount goes and nothing runs in it), the veth end in the other stays
// only as long as the forwarder's own handle keeps the dead namespace; two
// sweeps of the reaper later the connection is closed through begin: the
// end in the live namespace is gone and no descriptor of the dead one is
// left open in the process. A Close that comes later (the connection's
// expiry) finds nothing left to do.
func TestDeadPodTakesItsLinks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clientDies bool
	}{{"client", true}, {"endpoint", false}} {
		t.Run(tc.name, func(t *testing.T) { deadPodTakesItsLinks(t, tc.clientDies) })
	}
}

func deadPodTakesItsLinks(t *testing.T, clientDies bool) {
	nsc := testutil.NewNetNS(t, "rc")
	nse := testutil.NewNetNS(t, "re")
	reap := reaper.New()
	veth := newVethClient()
	defer veth.remove("conn-1")
	srv := chain.NewNetworkServiceServer(
		begin.NewServer(),
		metadata.NewServer(),
		reap.NewServer(),
		stashServer{},
		adapters.NewClientToServer(chain.NewNetworkServiceClient(
			mechanismtranslation.NewClient(),
			veth,
			reaper.NewClient(),
			endpointIn{netnsURL: "file://" + nse.Path(), name: "svc0"},
		)),
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := srv.Request(ctx, &networkservice.NetworkServiceRequest{
		Connection: &networkservice.Connection{Id: "conn-1", Mechanism: kernelMechanism("file://"+nsc.Path(), "nsm0")},
	})
	require.NoError(t, err)
	require.NotZero(t, index(t, nsc, "nsm0"))
	require.NotZero(t, index(t, nse, "svc0"))
	reap.Sweep(ctx) // both seen alive

	dead, live, liveEnd := nsc, nse, "svc0"
	if !clientDies {
		dead, live, liveEnd = nse, nsc, "nsm0"
	}
	ino := reaper.Inode("file://" + dead.Path())
	require.NotZero(t, ino)
	dead.Remove(t)
	require.NotZero(t, index(t, live, liveEnd), "the forwarder's own handle keeps the dead namespace, and the pair")
	require.NotEmpty(t, openNetNS(t, ino))

	reap.Sweep(ctx)
	reap.Sweep(ctx)
	require.Zero(t, index(t, live, liveEnd), "the dead pod's link is gone from the live namespace")
	require.Empty(t, openNetNS(t, ino), "no descriptor of the dead namespace is open")

	_, err = srv.Close(ctx, conn)
	require.NoError(t, err)
}
