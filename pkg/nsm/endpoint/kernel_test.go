package endpoint_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink/linkstest"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/chain/mtu"
	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
	"github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// TestKernelTargetToProxy runs the proxy's endpoint chain against a
// forwarder that builds real veth pairs: the target's interface gets the
// address the proxy assigned, the proxy's side gets its own, the interface
// monitor announces the proxy-side link from real kernel events, the two
// ends ping, and a Close removes the link and announces the delete.
func TestKernelTargetToProxy(t *testing.T) {
	testutil.RequireRoot(t)
	targetNS := testutil.NewNetNS(t, "nsm-tgt")
	proxyNS := testutil.NewNetNS(t, "nsm-prx")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	domain := nsmtest.NewVethDomain(ctx, t)
	nsmgrURL := domain.Nodes[0].NSMgr.URL

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds := credentials.Insecure(quiet, time.Hour)
	setter := newTargetSetter(10)
	h := &linkstest.Recorder{}
	// The proxy's dataplane holds the namespace's one table of links.
	dp, err := dataplane.New(ctx, dataplane.Options{NetNS: proxyNS.Handle, AnnounceCount: -1, Logger: quiet})
	require.NoError(t, err)
	defer func() { require.NoError(t, dp.Close()) }()
	monitor := connlink.New(h, dp, connlink.WithLogger(quiet))
	monCtx, stopMonitor := context.WithCancel(ctx)
	monDone := make(chan error, 1)
	linkEvents, unsubscribe := dp.Subscribe()
	go func() {
		defer unsubscribe()
		monDone <- monitor.Run(monCtx, linkEvents)
	}()
	defer func() {
		stopMonitor()
		<-monDone
	}()

	ep, err := endpoint.Start(ctx, endpoint.Config{
		Name:           "proxy-a",
		Service:        service,
		NodeName:       "node-a",
		ConnectTo:      nsmgrURL,
		TokenGenerator: creds.TokenGenerator(),
		DialOptions:    creds.NSMDialOptions(),
		ServerOptions:  creds.NSMServerOptions(),
		Elements: []networkservice.NetworkServiceServer{
			nsmtest.KernelServer(),
			netnsurl.NewServer(proxyNS.Path()),
			ipcontext.NewServer(setter, ipcontext.WithLogger(quiet)),
			connlink.NewServer(monitor, connlink.WithLogger(quiet)),
			mtu.NewServer(mtu.WithMTU(1400)),
		},
	}, endpoint.WithAuthorizeServer(creds.AuthorizeServer()), endpoint.WithLogger(quiet))
	require.NoError(t, err)
	defer func() { _ = ep.Stop(ctx) }()

	nsc := domain.Nodes[0].NewClient(ctx, sandbox.GenerateTestToken, client.WithAdditionalFunctionality(
		kernel.NewClient(kernel.WithInterfaceName("nsm-tgt0")),
		netnsurl.NewClient(targetNS.Path()),
		sendfd.NewClient(),
	))
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	conn, err := nsc.Request(rctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "target-1", NetworkService: service, Labels: map[string]string{endpoint.NodeNameLabel: "node-a"},
	}})
	require.NoError(t, err)

	// The target's side.
	out := targetNS.MustExec(t, "ip", "-o", "addr", "show", "dev", "nsm-tgt0")
	require.Contains(t, out, "inet 172.16.0.10/24")
	require.Contains(t, targetNS.MustExec(t, "ip", "-o", "link", "show", "dev", "nsm-tgt0"), "mtu 1400")

	// The proxy's side, announced from the kernel's own events.
	require.Eventually(t, func() bool { ev := h.Events(); return len(ev) == 1 }, 20*time.Second, 10*time.Millisecond)
	events, created := h.Events(), h.Last()
	require.True(t, strings.HasPrefix(events[0], "created "))
	require.Equal(t, proxy.TargetConn, created.Type)
	require.Equal(t, proxyNS.LinkIndex(t, created.Name), created.Index)
	require.Equal(t, conn.GetPath().GetPathSegments()[0].GetId(), created.ConnKey, "the target connection's key")
	require.Contains(t, proxyNS.MustExec(t, "ip", "-o", "addr", "show", "dev", created.Name), "inet 172.16.0.11/24")

	targetNS.MustExec(t, "ping", "-c", "1", "-W", "5", "172.16.0.11")

	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)
	require.Eventually(t, func() bool { ev := h.Events(); return len(ev) == 2 }, 20*time.Second, 10*time.Millisecond)
	events = h.Events()
	require.Equal(t, "deleted "+strings.TrimPrefix(events[0], "created "), events[1])
	_, err = proxyNS.Exec("ip", "link", "show", "dev", created.Name)
	require.Error(t, err, "the forwarder removed the link")
}
