package netnsurl_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
)

func TestOpen(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t, "url")
	h, err := netnsurl.Open("file://" + ns.Path())
	require.NoError(t, err)
	defer h.Close()
	want, err := netns.GetFromPath(ns.Path())
	require.NoError(t, err)
	defer want.Close()
	require.True(t, h.Equal(want), "Open must return the namespace the URL names")
}

func TestOpenRefusals(t *testing.T) {
	for _, raw := range []string{"", "/var/run/netns/x", "inode://4/4026532", "::"} {
		_, err := netnsurl.Open(raw)
		require.ErrorIs(t, err, netnsurl.ErrNotFileURL, raw)
	}
	_, err := netnsurl.Open("file:///var/run/netns/causeway-no-such-ns")
	require.Error(t, err)
	require.False(t, errors.Is(err, netnsurl.ErrNotFileURL))
	require.ErrorIs(t, err, fs.ErrNotExist, "a gone namespace keeps the open's error")
}
