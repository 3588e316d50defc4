package traffic

import (
	"fmt"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// LinkStat is an interface's packet counters.
type LinkStat struct {
	RxPackets, TxPackets uint64
}

// LinkStats reads the packet counters of every interface in the namespace
// at nsPath (current when empty), by name.
func LinkStats(nsPath string) (map[string]LinkStat, error) {
	h, err := netnsdo.NetlinkHandle(nsPath)
	if err != nil {
		return nil, fmt.Errorf("link stats: %w", err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("link stats: list links in %s: %w", nsPath, err)
	}
	m := map[string]LinkStat{}
	for _, l := range links {
		if s := l.Attrs().Statistics; s != nil {
			m[l.Attrs().Name] = LinkStat{RxPackets: s.RxPackets, TxPackets: s.TxPackets}
		}
	}
	return m, nil
}

// Delta is after minus before, per interface present in after.
func Delta(before, after map[string]LinkStat) map[string]LinkStat {
	d := map[string]LinkStat{}
	for name, a := range after {
		b := before[name]
		d[name] = LinkStat{RxPackets: a.RxPackets - b.RxPackets, TxPackets: a.TxPackets - b.TxPackets}
	}
	return d
}
