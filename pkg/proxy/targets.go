package proxy

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
)

// Labels of a target's NSM connection that name its pod: NSM's clientinfo
// element sets them from the environment of the process that runs it
// (POD_NAME, NODE_NAME from the downward API); a label already set is
// kept, so the target client's own values win over an NSMgr's.
const (
	PodNameLabel  = "podName"
	NodeNameLabel = "nodeName"
)

// ClientInfo is what a target connection says of its pod (Pod, Node: its
// labels, claimed by the client) and who its client proved to be
// (Identity: its SPIFFE ID, "" when none is proved; see TargetIdentity).
type ClientInfo struct {
	Pod      string
	Node     string
	Identity string
}

func clientInfoOf(conn *networkservice.Connection) ClientInfo {
	l := conn.GetLabels()
	return ClientInfo{Pod: l[PodNameLabel], Node: l[NodeNameLabel]}
}

// Target is one open target connection.
type Target struct {
	// Key is the connection's key (ConnKey).
	Key    string
	Client ClientInfo
	// Addrs are the target-side addresses the proxy handed out, in
	// family order.
	Addrs []netip.Addr
	// Linked says that the connection's interface is a port of the bridge.
	Linked bool
}

// Targets returns the open target connections (closed ones whose addresses
// wait for their release are left out), sorted by key. WatchTargets
// signals their changes.
func (p *Proxy) Targets() []Target {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Target
	for _, st := range p.conns {
		if st.typ != TargetConn || st.owner == "" {
			continue
		}
		out = append(out, Target{Key: st.id, Client: st.client, Addrs: p.targetAddrsLocked(st), Linked: st.link != 0})
	}
	slices.SortFunc(out, func(a, b Target) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// TargetAddrs are the addresses of the targets connected to the proxy:
// the target-side addresses the proxy handed out (never the VIPs a target
// carries too) of the target connections whose interface is a port of the
// bridge, sorted.
func (p *Proxy) TargetAddrs() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []netip.Addr
	for _, st := range p.conns {
		if st.typ != TargetConn || st.link == 0 {
			continue
		}
		out = append(out, p.targetAddrsLocked(st)...)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// targetAddrsLocked are the target-side addresses of st, in family order.
func (p *Proxy) targetAddrsLocked(st *connState) []netip.Addr {
	var out []netip.Addr
	for _, f := range p.cfg.Families {
		if a, ok := st.allocs[childKey{f, st.id + srcSuffix}]; ok {
			out = append(out, a.Addr().Unmap())
		}
	}
	return out
}

// watchers signal the subscribers of WatchTargets.
type watchers struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// WatchTargets returns a channel that receives a signal (coalesced) after
// each change of the proxy's model, so that a subscriber can read
// TargetAddrs or Targets again, and the function that ends the subscription.
func (p *Proxy) WatchTargets() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.watch.mu.Lock()
	if p.watch.subs == nil {
		p.watch.subs = map[chan struct{}]struct{}{}
	}
	p.watch.subs[ch] = struct{}{}
	p.watch.mu.Unlock()
	return ch, func() {
		p.watch.mu.Lock()
		delete(p.watch.subs, ch)
		p.watch.mu.Unlock()
	}
}

func (w *watchers) signal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
