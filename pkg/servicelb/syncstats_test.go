package servicelb

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// -debug shows the sync stats as an operator reads them.
func TestSyncStatsJSON(t *testing.T) {
	b, err := json.Marshal(SyncStats{Syncs: 3, LastObjects: 7, TotalObjects: 40, LastDuration: 1500 * time.Microsecond,
		LastKernel: 400 * time.Microsecond, ConntrackFlushed: 2})
	require.NoError(t, err)
	require.JSONEq(t, `{"syncs":3,"lastObjects":7,"totalObjects":40,"lastDuration":"1.5ms","lastKernel":"400µs","conntrackFlushed":2}`, string(b))
	var back SyncStats
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, SyncStats{Syncs: 3, LastObjects: 7, TotalObjects: 40, LastDuration: 1500 * time.Microsecond,
		LastKernel: 400 * time.Microsecond, ConntrackFlushed: 2}, back, "a -debug client reads it back")
}
