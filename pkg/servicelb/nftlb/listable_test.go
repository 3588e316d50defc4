package nftlb

import (
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

// TestRulesetListable: operators read our table with nft(8), which must not
// abort on it (an untyped integer in a concatenation makes it assert). nft
// cannot print the round-robin rule (its NAT takes address and port from a
// map lookup's registers, which nft's decoder does not follow) but lists
// everything else.
func TestRulesetListable(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft(8) is not installed (scripts/install-deps.sh lists it)")
	}
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	s := subject(t, topo)
	for _, ip := range []netip.Addr{slbtest.ServiceIP4, slbtest.ServiceIP6} {
		s.Apply(t, slbtest.Config{IP: ip, Port: 80, Protocol: servicelb.UDP, Affinity: servicelb.AffinityClientIP,
			Timeout: time.Minute, Hosts: topo.Endpoints, EPPort: echo.Port})
		_, err := s.Hello(t, servicelb.UDP, netip.AddrPortFrom(ip, 80))
		require.NoError(t, err)
		out := topo.Proxy.MustExec(t, "nft", "list", "table", "inet", TableName)
		require.Contains(t, out, "type mark . mark : ipv")
		require.Contains(t, out, "timeout 1m expires", "the client's affinity element")
		t.Log(out)
	}
}
