package provider

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/nftlb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace"
)

func TestNew(t *testing.T) {
	_, err := New(Config{Provider: "ipvs"})
	require.ErrorContains(t, err, `unknown service load balancer provider "ipvs"`)

	ns := testutil.NewNetNS(t, "slbprov")
	for name, want := range map[string]any{servicelb.ProviderUserspace: &userspace.Proxier{}, servicelb.ProviderNftables: &nftlb.Provider{}} {
		p, err := New(Config{Provider: name, NetNS: ns.Handle})
		require.NoError(t, err, name)
		require.IsType(t, want, p)
		require.NoError(t, p.Close())
	}
}
