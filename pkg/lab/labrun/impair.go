package labrun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/causeway-net/causeway/pkg/lab/impair"
)

// BreakLB breaks an LB's datapath toward the proxy without NSM noticing:
// its namespace drops every packet (lossPercent 0 or 100), or that share of
// them at random, that comes in on or goes out of any link but its link to
// the external host (and lo). The LB's process, its links and addresses
// stay; the external host still routes over it. A later BreakLB replaces
// the impairment; MendLB removes it. Any process may do it (it needs no
// owner): it is a table in the LB's namespace, gone with the namespace.
func (l *Lab) BreakLB(name string, lossPercent int) error {
	if err := l.knownLB(name); err != nil {
		return err
	}
	return impair.Break(l.NetNSPath(name), impair.Impairment{Keep: []string{"lo", lbExtIf}, LossPercent: lossPercent})
}

// MendLB removes what BreakLB did to the LB (nothing is no error).
func (l *Lab) MendLB(name string) error {
	if err := l.knownLB(name); err != nil {
		return err
	}
	return impair.Mend(l.NetNSPath(name))
}

// LBBroken reports whether the LB's datapath is broken by BreakLB.
func (l *Lab) LBBroken(name string) (bool, error) {
	if err := l.knownLB(name); err != nil {
		return false, err
	}
	return impair.Broken(l.NetNSPath(name))
}

func (l *Lab) knownLB(name string) error {
	if lbs := l.LBs(); !slices.Contains(lbs, name) {
		return fmt.Errorf("unknown LB %q (one of %s)", name, strings.Join(lbs, ", "))
	}
	return nil
}
