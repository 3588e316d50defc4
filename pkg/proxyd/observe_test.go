package proxyd_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/proxyd"
)

// TestGetDebugLeavesNoConnection asks a debug socket several times: every
// connection the server accepted is closed once GetDebug returns. (Each
// call used to leave its kept-alive connection open, a goroutine and a
// descriptor of the proxy per `proxy -debug` or lab check, for ever.)
func TestGetDebugLeavesNoConnection(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "debug.sock")
	lis, err := net.Listen("unix", socket)
	require.NoError(t, err)
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	accepted := 0
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.String()) }),
		ConnState: func(c net.Conn, s http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			switch s {
			case http.StateNew:
				open[c] = true
				accepted++
			case http.StateClosed, http.StateHijacked:
				delete(open, c)
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		_ = srv.Close()
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const calls = 5
	for range calls {
		var out strings.Builder
		require.NoError(t, proxyd.GetDebug(ctx, socket, "/debug/pprof/heap?debug=1", &out))
		require.Equal(t, "/debug/pprof/heap?debug=1", out.String())
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return accepted == calls && len(open) == 0
	}, time.Minute, 10*time.Millisecond, "every connection closed after its answer")

	require.Error(t, proxyd.GetDebug(ctx, filepath.Join(t.TempDir(), "none.sock"), "/state", io.Discard))
	err = proxyd.PrintDebug(ctx, socket+".missing", io.Discard)
	var opErr *net.OpError
	require.True(t, errors.As(err, &opErr), "a missing socket is a dial error: %v", err)
}
