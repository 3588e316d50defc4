package impair_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/impair"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lbBed is an LB namespace with two links: ext0 toward the external host
// (10.91.0.2) and nsm0 toward the proxy (10.92.0.2).
func lbBed(t *testing.T) (lb, ext, proxy *testutil.NetNS) {
	testutil.RequireRoot(t)
	lb, ext, proxy = testutil.NewNetNS(t, "imp-lb"), testutil.NewNetNS(t, "imp-ext"), testutil.NewNetNS(t, "imp-px")
	for _, l := range []struct {
		peer      *testutil.NetNS
		name, sub string
	}{{ext, "ext0", "10.91.0"}, {proxy, "nsm0", "10.92.0"}} {
		lb.MustExec(t, "ip", "link", "add", l.name, "type", "veth", "peer", "name", "eth0", "netns", l.peer.Name)
		lb.MustExec(t, "ip", "addr", "add", l.sub+".1/24", "dev", l.name)
		lb.MustExec(t, "ip", "link", "set", l.name, "up")
		l.peer.MustExec(t, "ip", "addr", "add", l.sub+".2/24", "dev", "eth0")
		l.peer.MustExec(t, "ip", "link", "set", "eth0", "up")
	}
	return lb, ext, proxy
}

var received = regexp.MustCompile(`(\d+) received`)

// answered pings the LB's address from ns n times and returns how many
// answers came.
func answered(t *testing.T, ns *testutil.NetNS, addr string, n int) int {
	out, _ := ns.Exec("ping", "-q", "-n", "-c", strconv.Itoa(n), "-i", "0.002", "-W", "1", addr)
	m := received.FindStringSubmatch(out)
	require.NotNil(t, m, "ping output: %s", out)
	got, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return got
}

// Broken, the LB answers nothing on the proxy's link and still answers on
// the kept one; mended, it answers again; loss drops a share.
func TestBreakAndMend(t *testing.T) {
	lb, ext, proxy := lbBed(t)
	require.Equal(t, 5, answered(t, proxy, "10.92.0.1", 5))

	im := impair.Impairment{Keep: []string{"lo", "ext0"}}
	require.NoError(t, impair.Break(lb.Path(), im))
	broken, err := impair.Broken(lb.Path())
	require.NoError(t, err)
	require.True(t, broken)
	require.Zero(t, answered(t, proxy, "10.92.0.1", 5), "the proxy's link is cut")
	require.Equal(t, 5, answered(t, ext, "10.91.0.1", 5), "the kept link is not")
	out := lb.MustExec(t, "ip", "link", "show", "nsm0")
	require.Contains(t, out, "state UP", "the link stays up")

	im.LossPercent = 30
	require.NoError(t, impair.Break(lb.Path(), im), "a new impairment replaces the old one")
	got := answered(t, proxy, "10.92.0.1", 400)
	t.Logf("30 %% loss each way: %d of 400 pings answered (about 49 %% expected)", got)
	require.Greater(t, got, 100)
	require.Less(t, got, 300)

	require.NoError(t, impair.Mend(lb.Path()))
	require.NoError(t, impair.Mend(lb.Path()), "mending twice is harmless")
	broken, err = impair.Broken(lb.Path())
	require.NoError(t, err)
	require.False(t, broken)
	require.Equal(t, 5, answered(t, proxy, "10.92.0.1", 5))
}

func TestBreakRefusesBadLoss(t *testing.T) {
	require.ErrorContains(t, impair.Break("/nonexistent", impair.Impairment{LossPercent: 101}), "loss 101 %")
}
