package ipamd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
)

// TestRunSnapshotsAtStopAndRefusesDamage: a clean stop leaves a snapshot
// next to the datasource; a damaged datasource makes Run fail with
// ExitStoreDamaged and a message pointing at that snapshot and at ipam
// restore.
func TestRunSnapshotsAtStopAndRefusesDamage(t *testing.T) {
	cfg := testConfig(t)
	cfg.SnapshotInterval = 0 // only at stop
	client, _, stop := start(t, cfg)
	assert.Equal(t, "169.255.0.1/24", allocate(t, client, ipamv1.IPFamily_IPV4, "a"))
	assert.NotContains(t, scrape(t, cfg.MetricsPort), `causeway_ipam_store_snapshots_total{result="ok"}`, "none before the stop")
	require.NoError(t, stop())
	list, err := cfg.snapshots().List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, filepath.Join(filepath.Dir(cfg.Datasource), "snapshots"), filepath.Dir(list[0].Path))
	c, err := bolt.Inspect(list[0].Path)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Children)

	// Periodic snapshots are counted.
	cfg.SnapshotInterval = 50 * time.Millisecond
	client, _, stop = start(t, cfg)
	allocate(t, client, ipamv1.IPFamily_IPV4, "a")
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, cfg.MetricsPort), `causeway_ipam_store_snapshots_total{result="ok"}`)
	}, waitFor, 20*time.Millisecond)
	require.NoError(t, stop())

	require.NoError(t, os.Truncate(cfg.Datasource, 0))
	err = Run(context.Background(), cfg, slog.New(slog.DiscardHandler))
	var exit *daemon.ExitError
	require.True(t, errors.As(err, &exit), "%v", err)
	assert.Equal(t, ExitStoreDamaged, exit.Status)
	assert.Contains(t, exit.Message, cfg.Datasource)
	assert.Contains(t, exit.Message, "snapshot (")
	assert.Contains(t, exit.Message, "ipam restore -datasource "+cfg.Datasource)
}
