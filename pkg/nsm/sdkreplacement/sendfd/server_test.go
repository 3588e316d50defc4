package sendfd_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edwarnicke/grpcfd"
	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/common"
	sdksendfd "github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"

	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/sendfd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// earlyWriter is the server end of a real grpcfd connection whose sends
// are written before the element looks at their result, as happens when
// another frame goes out on the connection first: each SendFilename
// returns only once the descriptor is on the wire and grpcfd has reported
// its second close of the file.
type earlyWriter struct {
	net.Addr
	grpcfd.FDTransceiver
	conn net.Conn
	t    *testing.T
}

func (w *earlyWriter) SendFilename(name string) <-chan error {
	errs := w.FDTransceiver.SendFilename(name)
	_, err := w.conn.Write([]byte{0})
	require.NoError(w.t, err)
	require.Eventually(w.t, func() bool { return len(errs) == 1 }, time.Minute, time.Millisecond,
		"grpcfd reports its close of the written file")
	return errs
}

// fdConn returns a grpcfd connection's server end as a gRPC peer address,
// and the client's end, which receives what the server sends.
func fdConn(t *testing.T) (*earlyWriter, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	ends := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		require.NoError(t, f.Close())
		require.NoError(t, err)
		ends[i] = c.(*net.UnixConn)
	}
	t.Cleanup(func() { _ = ends[1].Close() })
	srv, _, err := grpcfd.TransportCredentials(insecure.NewCredentials()).ServerHandshake(ends[0])
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	tr, ok := srv.(grpcfd.FDTransceiver)
	require.True(t, ok, "grpcfd wraps a unix connection")
	return &earlyWriter{Addr: srv.LocalAddr(), FDTransceiver: tr, conn: srv, t: t}, ends[1]
}

// received reads one descriptor from the client's end and returns the
// inode URL of what it refers to.
func received(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	require.NoError(t, err)
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	fds, err := unix.ParseUnixRights(&msgs[0])
	require.NoError(t, err)
	require.Len(t, fds, 1)
	defer unix.Close(fds[0])
	u, err := grpcfd.FDToURL(uintptr(fds[0]))
	require.NoError(t, err)
	return u.String()
}

// nsFile stands for an endpoint's namespace file.
func nsFile(t *testing.T) (fileURL, inodeURL string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netns")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	u, err := grpcfd.FilenameToURL(path)
	require.NoError(t, err)
	return (&url.URL{Scheme: "file", Path: path}).String(), u.String()
}

// answer is the rest of an endpoint's chain: it names the file in the
// answer's mechanism and counts the closes.
type answer struct {
	file   string
	closes atomic.Int32
}

func (a *answer) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	conn := r.GetConnection()
	conn.Mechanism = &networkservice.Mechanism{Type: "KERNEL", Parameters: map[string]string{}}
	if a.file != "" {
		conn.Mechanism.Parameters[common.InodeURL] = a.file
	}
	return next.Server(ctx).Request(ctx, r)
}

func (a *answer) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	a.closes.Add(1)
	return next.Server(ctx).Close(ctx, conn)
}

func request(id string) *networkservice.NetworkServiceRequest {
	return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: id}}
}

func TestRequestSentBeforeLookedAt(t *testing.T) {
	fileURL, inodeURL := nsFile(t)
	w, client := fdConn(t)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: w})
	srv := chain.NewNetworkServiceServer(sendfd.NewServer(), &answer{file: fileURL})

	conn, err := srv.Request(ctx, request("c1"))
	require.NoError(t, err, "a written descriptor is a sent one")
	require.Equal(t, inodeURL, conn.GetMechanism().GetParameters()[common.InodeURL])
	require.Equal(t, inodeURL, received(t, client), "the client got the namespace file")

	closing := conn.Clone()
	closing.GetMechanism().GetParameters()[common.InodeURL] = fileURL
	_, err = srv.Close(ctx, closing)
	require.NoError(t, err, "Close too")
	require.Equal(t, inodeURL, received(t, client))
}

// TestSDKFailsSentBeforeLookedAt shows that the test above reproduces the
// SDK's false failure; when this fails, grpcfd or the SDK is fixed and
// this package can go.
func TestSDKFailsSentBeforeLookedAt(t *testing.T) {
	fileURL, _ := nsFile(t)
	w, client := fdConn(t)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: w})
	srv := chain.NewNetworkServiceServer(sdksendfd.NewServer(), &answer{file: fileURL})
	_, err := srv.Request(ctx, request("c1"))
	require.ErrorIs(t, err, os.ErrClosed)
	require.ErrorContains(t, err, "file already closed")
	received(t, client)
}

func TestRequestFileMissing(t *testing.T) {
	fileURL, _ := nsFile(t)
	path, _ := url.Parse(fileURL)
	require.NoError(t, os.Remove(path.Path))
	w, _ := fdConn(t)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: w})
	rest := &answer{file: fileURL}
	srv := chain.NewNetworkServiceServer(sendfd.NewServer(), rest)

	_, err := srv.Request(ctx, request("c1"))
	require.ErrorContains(t, err, path.Path)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.EqualValues(t, 1, rest.closes.Load(), "the connection set up is closed again")
}

func TestNothingToSend(t *testing.T) {
	fileURL, _ := nsFile(t)
	for name, tc := range map[string]struct {
		file string
		peer bool
	}{
		"no inode parameter": {peer: true},
		"not a file URL":     {file: "inode://1/2", peer: true},
		"no grpcfd peer":     {file: fileURL},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if tc.peer {
				w, _ := fdConn(t)
				w.t = nil // a send would fail the test through a nil t
				ctx = peer.NewContext(ctx, &peer.Peer{Addr: w})
			}
			srv := chain.NewNetworkServiceServer(sendfd.NewServer(), &answer{file: tc.file})
			conn, err := srv.Request(ctx, request("c1"))
			require.NoError(t, err)
			require.Equal(t, tc.file, conn.GetMechanism().GetParameters()[common.InodeURL])
			_, err = srv.Close(ctx, conn)
			require.NoError(t, err)
		})
	}
}

// lateFailure is a sender whose send fails only after the element looked,
// as grpcfd reports it: the send's error, then the close error, into a
// channel of one slot.
type lateFailure struct {
	net.Addr
	grpcfd.FDTransceiver
	fail chan struct{}
	done chan struct{}
}

func (l *lateFailure) SendFilename(string) <-chan error {
	errs := make(chan error, 1)
	go func() {
		defer close(l.done)
		<-l.fail
		errs <- errors.New("connection closed with the descriptor queued")
		errs <- &os.PathError{Op: "close", Path: "netns", Err: os.ErrClosed}
		close(errs)
	}()
	return errs
}

func TestLateFailureDoesNotBlockGrpcfd(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	fileURL, _ := nsFile(t)
	w, _ := fdConn(t)
	l := &lateFailure{Addr: w.Addr, FDTransceiver: w.FDTransceiver, fail: make(chan struct{}), done: make(chan struct{})}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: l})
	_, err := chain.NewNetworkServiceServer(sendfd.NewServer(), &answer{file: fileURL}).Request(ctx, request("c1"))
	require.NoError(t, err, "nothing was reported when the element looked")
	close(l.fail)
	select {
	case <-l.done:
	case <-time.After(time.Minute):
		t.Fatal("the sender's goroutine is blocked on its second error")
	}
}
