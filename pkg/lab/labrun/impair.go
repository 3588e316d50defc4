package labrun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/causeway-net/causeway/pkg/lab/impair"
)

// Break breaks the datapath between an LB or a target and the proxy
// without NSM noticing: its namespace drops every packet (lossPercent 0 or
// 100), or that share of them at random, that comes in on or goes out of
// any link but lo and, for an LB, its link to the external host. The
// process, its links and addresses stay; the external host still routes
// over an LB broken so. A later Break replaces the impairment; Mend removes
// it. Any process may do it (it needs no owner): it is a table in the
// component's namespace, gone with the namespace.
func (l *Lab) Break(name string, lossPercent int) error {
	keep, err := l.keptLinks(name)
	if err != nil {
		return err
	}
	return impair.Break(l.NetNSPath(name), impair.Impairment{Keep: keep, LossPercent: lossPercent})
}

// Mend removes what Break did to the component (nothing is no error).
func (l *Lab) Mend(name string) error {
	if _, err := l.keptLinks(name); err != nil {
		return err
	}
	return impair.Mend(l.NetNSPath(name))
}

// Broken reports whether the component's datapath is broken by Break.
func (l *Lab) Broken(name string) (bool, error) {
	if _, err := l.keptLinks(name); err != nil {
		return false, err
	}
	return impair.Broken(l.NetNSPath(name))
}

// keptLinks are the links Break leaves alone in an LB's or a target's
// namespace.
func (l *Lab) keptLinks(name string) ([]string, error) {
	switch st := l.state(); {
	case slices.Contains(st.LBs, name):
		return []string{"lo", lbExtIf}, nil
	case slices.Contains(st.Targets, name):
		return []string{"lo"}, nil
	default:
		return nil, fmt.Errorf("%q is no LB or target (one of %s)", name, strings.Join(append(st.LBs, st.Targets...), ", "))
	}
}
