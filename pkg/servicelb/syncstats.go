package servicelb

import (
	"encoding/json"
	"fmt"
	"time"
)

// SyncStats are the figures of a provider's syncs so far, for a provider
// that writes the kernel in one transaction per sync (nftables).
type SyncStats struct {
	Syncs            uint64
	LastObjects      int // objects (table, chains, rules, sets, elements, deletions) sent by the last sync
	TotalObjects     uint64
	LastDuration     time.Duration
	LastKernel       time.Duration // of LastDuration, the transaction's round trip to the kernel
	ConntrackFlushed uint64
}

// statsJSON is SyncStats as -debug shows it: lower camel keys, durations as
// text.
type statsJSON struct {
	Syncs            uint64 `json:"syncs"`
	LastObjects      int    `json:"lastObjects"`
	TotalObjects     uint64 `json:"totalObjects"`
	LastDuration     string `json:"lastDuration"`
	LastKernel       string `json:"lastKernel"`
	ConntrackFlushed uint64 `json:"conntrackFlushed"`
}

// MarshalJSON renders the stats for -debug.
func (s SyncStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(statsJSON{s.Syncs, s.LastObjects, s.TotalObjects, s.LastDuration.String(), s.LastKernel.String(), s.ConntrackFlushed})
}

// UnmarshalJSON reads what MarshalJSON wrote (a -debug client's side).
func (s *SyncStats) UnmarshalJSON(b []byte) error {
	var w statsJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	last, err := time.ParseDuration(w.LastDuration)
	if err != nil {
		return fmt.Errorf("lastDuration: %w", err)
	}
	kernel, err := time.ParseDuration(w.LastKernel)
	if err != nil {
		return fmt.Errorf("lastKernel: %w", err)
	}
	*s = SyncStats{w.Syncs, w.LastObjects, w.TotalObjects, last, kernel, w.ConntrackFlushed}
	return nil
}
