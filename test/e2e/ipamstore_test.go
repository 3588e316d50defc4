package e2e_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIPAMStoreDamagedAndRestored: the IPAM stops cleanly (it snapshots its
// store), later dies, and its store is found truncated to half. The IPAM
// refuses it with its own exit status and says how to restore; `ipam
// restore` puts the snapshot back; the IPAM starts on it and every target
// is on its old address, with no address on two interfaces.
func TestIPAMStoreDamagedAndRestored(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := targetAddrs(l)
	require.NoError(t, l.RestartComponent("ipam", stopGrace), "a clean stop writes a snapshot")
	require.NoError(t, l.KillIPAM())

	// bbolt's two header pages and a part of the first data page.
	require.NoError(t, os.Truncate(l.IPAMStore(), 2*4096+512))
	require.Error(t, l.StartIPAM(), "a truncated store is refused")
	require.Equal(t, 3, l.ExitStatus("ipam"), "the damaged-store exit status")
	log := logOf(l, "ipam")
	require.Contains(t, log, l.IPAMStore(), "the message names the file")
	require.Contains(t, log, "ipam restore", "and says what to do")
	require.NotContains(t, log, "panic")

	out, err := l.RestoreIPAM()
	require.NoError(t, err, "ipam restore: %s", out)
	t.Logf("ipam restore said:\n%s", out)
	require.NoError(t, l.StartIPAM())
	requireGreen(t, ctx, l, waitLong, "after the restore")
	requireUniqueAddrs(t, l)
	for name, a := range before {
		require.ElementsMatch(t, a, l.TargetAddrs(name), "%s keeps its addresses", name)
	}
	// New allocations after the restore do not collide with the restored ones.
	require.NoError(t, l.StartTarget("late-1"))
	requireGreen(t, ctx, l, waitLong, "a new target after the restore")
	requireUniqueAddrs(t, l)
}
