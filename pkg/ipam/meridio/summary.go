package meridio

import (
	"time"

	"github.com/causeway-net/causeway/pkg/ipam"
)

// Trench is what was read of one trench root (one family of one trench).
type Trench struct {
	Name   string
	Family ipam.Family
	// Geometry is the stored pool with the conduit and node lengths of the
	// stored rows; a length that no row shows is the configured one
	// (StoredConduitLength, StoredNodeLength false).
	Geometry                              ipam.FamilyConfig
	StoredConduitLength, StoredNodeLength bool
	Conduits, Nodes, Children             int
}

// Skip is a row that was not imported, and why.
type Skip struct {
	ID, Name, CIDR, Reason string
}

// MaxSkipDetails is how many skipped rows a Summary lists (all are counted).
const MaxSkipDetails = 20

// Summary says what Read found.
type Summary struct {
	Path     string
	Trenches []Trench
	// Heartbeat is the newest lease time in the database: when Meridio's
	// IPAM was last known alive. It is the trenches' heartbeat in the
	// store, so that the time between Meridio's stop and Causeway's start
	// does not count against the leases (as for any downtime).
	Heartbeat time.Time
	// Renewed counts the nodes and children without a usable lease time
	// or not marked expirable: they get Heartbeat, as Meridio's own start
	// would renew them.
	Renewed     int
	Skipped     int
	SkippedRows []Skip
}

// Totals adds up the trenches.
func (s *Summary) Totals() (conduits, nodes, children int) {
	for _, t := range s.Trenches {
		conduits += t.Conduits
		nodes += t.Nodes
		children += t.Children
	}
	return conduits, nodes, children
}

func (s *Summary) skip(r row, reason string) {
	s.Skipped++
	if len(s.SkippedRows) < MaxSkipDetails {
		s.SkippedRows = append(s.SkippedRows, Skip{ID: r.id, Name: r.name, CIDR: r.cidr, Reason: reason})
	}
}
