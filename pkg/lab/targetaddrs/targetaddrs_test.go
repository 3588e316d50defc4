package targetaddrs

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPublishReadWithdraw(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "targets")
	pubs, err := Read(dir)
	require.NoError(t, err)
	require.Empty(t, pubs)

	a := netip.MustParseAddr("172.16.1.5")
	b := netip.MustParseAddr("fd00::5")
	c := netip.MustParseAddr("172.16.1.6")
	require.NoError(t, Publish(dir, "t1", []netip.Addr{a, b}))
	require.NoError(t, Publish(dir, "t2", []netip.Addr{c, a}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".tmp-x"), []byte("10.0.0.1\n"), 0o600))

	pubs, err = Read(dir)
	require.NoError(t, err)
	require.Equal(t, map[string][]netip.Addr{"t1": {a, b}, "t2": {c, a}}, pubs)
	require.Equal(t, []netip.Addr{a, c, b}, Addrs(pubs))

	require.NoError(t, Publish(dir, "t1", []netip.Addr{b}))
	require.NoError(t, Withdraw(dir, "t2"))
	require.NoError(t, Withdraw(dir, "t2"))
	pubs, err = Read(dir)
	require.NoError(t, err)
	require.Equal(t, map[string][]netip.Addr{"t1": {b}}, pubs)

	require.Error(t, Publish(dir, "../x", nil))
}
