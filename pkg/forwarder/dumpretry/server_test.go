package dumpretry_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/forwarder/dumpretry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tail is the rest of a chain: it answers with fn's error.
type tail struct{ fn func() error }

func (t tail) Request(_ context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	if err := t.fn(); err != nil {
		return nil, err
	}
	return r.GetConnection(), nil
}

func (tail) Close(context.Context, *networkservice.Connection) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

func request(t *testing.T, s networkservice.NetworkServiceServer) error {
	_, err := s.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c"}})
	return err
}

func TestRetriesInterruptedDumpsOnly(t *testing.T) {
	var calls, retried int
	fails := 2
	s := next.NewNetworkServiceServer(
		dumpretry.NewServer(dumpretry.WithPause(0), dumpretry.WithRetried(func(error) { retried++ })),
		tail{func() error {
			calls++
			if calls <= fails {
				// Wrapped, as sdk-kernel does.
				return fmt.Errorf("failed to list ip addresses: %w", netlink.ErrDumpInterrupted)
			}
			return nil
		}})
	require.NoError(t, request(t, s))
	require.Equal(t, 3, calls)
	require.Equal(t, 2, retried)

	// Gives up after the attempts, with the error.
	calls, fails = 0, 100
	s = next.NewNetworkServiceServer(dumpretry.NewServer(dumpretry.WithPause(0), dumpretry.WithAttempts(3)),
		tail{func() error { calls++; return netlink.ErrDumpInterrupted }})
	require.ErrorIs(t, request(t, s), netlink.ErrDumpInterrupted)
	require.Equal(t, 3, calls)

	// Another error is not retried.
	calls = 0
	s = next.NewNetworkServiceServer(dumpretry.NewServer(dumpretry.WithPause(0)),
		tail{func() error { calls++; return errors.New("no such link") }})
	require.Error(t, request(t, s))
	require.Equal(t, 1, calls)
}

func TestInterrupted(t *testing.T) {
	require.True(t, dumpretry.Interrupted(fmt.Errorf("x: %w", netlink.ErrDumpInterrupted)))
	require.True(t, dumpretry.Interrupted(status.Error(codes.Unknown, "failed to list ip addresses: "+netlink.ErrDumpInterrupted.Error())),
		"across gRPC")
	require.False(t, dumpretry.Interrupted(nil))
	require.False(t, dumpretry.Interrupted(errors.New("other")))
}

// TestKernelDumpsUnderChurn lists a link's addresses, as sdk-kernel does
// for every connection, while hundreds of other links get and lose
// addresses in the same namespace (the lab's forwarder bringing up
// hundreds of targets): interrupted dumps happen, and behind the element
// no request fails.
func TestKernelDumpsUnderChurn(t *testing.T) {
	ns := testutil.NewNetNS(t, "dumpr")
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	defer h.Close()
	const links, requests = 200, 200
	all := make([]netlink.Link, 0, links)
	for i := range links {
		name := fmt.Sprintf("d%d", i)
		require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}))
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		require.NoError(t, h.LinkSetUp(l))
		for j := range 4 { // enough addresses that a dump takes several reads
			a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(172, 20+byte(j), byte(i>>8), byte(i)), Mask: net.CIDRMask(24, 32)}}
			require.NoError(t, h.AddrAdd(l, a))
		}
		all = append(all, l)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := netlink.NewHandleAt(ns.Handle)
			if err != nil {
				return
			}
			defer ch.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l := all[(i*7+w)%links]
				a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, byte(w), byte(i>>8), byte(i)), Mask: net.CIDRMask(32, 32)}}
				_ = ch.AddrAdd(l, a)
				_ = ch.AddrDel(l, a)
				time.Sleep(time.Millisecond) // a forwarder programming connections

			}
		}()
	}
	var interrupted atomic.Int64
	s := next.NewNetworkServiceServer(
		dumpretry.NewServer(dumpretry.WithRetried(func(error) { interrupted.Add(1) })),
		tail{func() error {
			if _, err := h.AddrList(all[0], netlink.FAMILY_ALL); err != nil {
				return fmt.Errorf("failed to list ip addresses: %w", err)
			}
			return nil
		}})
	failed := 0
	for range requests {
		if err := request(t, s); err != nil {
			failed++
			t.Logf("request failed: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("FIGURE: %d address listings under churn of %d links: %d interrupted dumps retried, %d requests failed",
		requests, links, interrupted.Load(), failed)
	require.Zero(t, failed)
}
