package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIngress is scenario 1: 300 TCP connections and 300 UDP flows from the
// external host to the VIPs all succeed, and every target serves at least
// 15% of them.
func TestIngress(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, network := range []string{"tcp", "udp"} {
		tally, err := ingress(ctx, l, network, 300, nil)
		require.NoError(t, err)
		t.Logf("%s: %v", network, tally)
		require.Equal(t, 300, tally.Total)
		require.Zero(t, tally.Errors, "%s: every flow succeeds: %v", network, tally)
		require.Len(t, tally.Answers, len(l.Targets()), "%s: answers from exactly the lab's targets: %v", network, tally)
		for _, name := range l.Targets() {
			require.GreaterOrEqual(t, tally.Share(name), 0.15, "%s: %s serves at least 15%%: %v", network, name, tally)
		}
	}
}
