package conntrackflush

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/ti-mo/conntrack"
)

// Fake is an Interface for tests. It records the prefixes of every flush,
// fails the first Fail of them with Err, and hands the others to Next (a
// real Flusher, for a test that checks the kernel) or deletes nothing when
// Next is nil.
type Fake struct {
	Fail int
	Err  error
	Next Interface

	mu      sync.Mutex
	flushes [][]netip.Prefix
}

// Flush implements Interface.
func (f *Fake) Flush(ps []netip.Prefix, keep func(*conntrack.Flow) bool) (int, error) {
	f.mu.Lock()
	f.flushes = append(f.flushes, slices.Clone(ps))
	fail := len(f.flushes) <= f.Fail
	f.mu.Unlock()
	if fail {
		return 0, f.Err
	}
	if f.Next == nil {
		return 0, nil
	}
	return f.Next.Flush(ps, keep)
}

// Close implements Interface.
func (f *Fake) Close() {
	if f.Next != nil {
		f.Next.Close()
	}
}

// Flushes returns the prefixes of each flush so far, failed ones included.
func (f *Fake) Flushes() [][]netip.Prefix {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.flushes)
}
