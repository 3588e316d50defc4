package relay

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/internal/testutil"
)

// TestConnectionsPerClientBounded performs the attack of finding 4 on the
// userspace relay: one client opens connections and holds them. Past the
// limit a new one is reset at once (nothing reaches the endpoint),
// counted, and logged once.
func TestConnectionsPerClientBounded(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	log := &testutil.JSONLog{}
	refusals := limits.New("test", slog.New(slog.NewJSONHandler(log, nil)))
	l := startLoop(t, Config{MaxPerClient: 3, Refusals: refusals})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record})

	var held []*bufio.Reader
	for range 3 {
		c := dial(t, ln)
		r := bufio.NewReader(c)
		readGreeting(t, r)
		held = append(held, r)
	}
	for range 4 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err == nil { // else reset before the dial returned
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			var got []byte
			got, err = io.ReadAll(c)
			require.Empty(t, got, "a refused connection reaches no endpoint")
			_ = c.Close()
		}
		require.ErrorContains(t, err, "reset", "a refused connection is reset")
	}
	require.Equal(t, 4, refusals.Count("relay_connections_per_client"))
	require.Equal(t, 1, log.Count("limit reached: request refused (logged once per cause)"))
	require.Len(t, held, 3)
}
