package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

// Child name suffixes of a connection's two addresses per family.
const (
	srcSuffix = "-src"
	dstSuffix = "-dst"
)

// childKey names one IPAM allocation of the proxy.
type childKey struct {
	Family ipamv1.IPFamily
	Name   string
}

// connState is what the proxy knows about one connection id.
type connState struct {
	id       string
	typ      ConnType
	owner    string                    // the NSM connection id of the last successful SetIPContext, "" once closed
	allocs   map[childKey]netip.Prefix // addresses the IPAM gave this id and that are not released
	release  *pendingRelease           // non-nil while a release is scheduled or running
	link     int                       // index of the connection's kernel link (a port), 0 if none
	linkName string                    // its name, for the snapshot
	lastLink int                       // the link it had before (link 0): to remove if left over
	lastName string                    // that link's name
	hops     []netip.Addr              // the nexthops of link: the LB's addresses, from allocs
	client   ClientInfo                // a target's pod, from its connection's labels
	clientID string                    // a target's client, for its limit (clientIdentity)
}

// ConnKey returns the key of a connection, the one name the proxy, the
// link matcher and the IPAM's child names use for it: the connection
// id for an LB connection (the proxy is its client and chose it), the
// target's own path segment id for a target connection (the proxy's side of
// it is renamed by every NSMgr and proxy replacement, the target's is not).
func ConnKey(conn *networkservice.Connection, t ConnType) (string, error) {
	if conn == nil {
		return "", errors.New("nil connection")
	}
	var id string
	switch t {
	case LBConn:
		id = conn.GetId()
	case TargetConn:
		if segs := conn.GetPath().GetPathSegments(); len(segs) > 0 {
			id = segs[0].GetId()
		}
	default:
		return "", fmt.Errorf("unknown connection type %d", t)
	}
	if id == "" {
		return "", fmt.Errorf("%s connection %q has no key id", t, conn.GetId())
	}
	return id, nil
}

// children returns the IPAM children of id in family order, src before dst.
func (p *Proxy) children(id string) []childKey {
	var out []childKey
	for _, f := range p.cfg.Families {
		out = append(out, childKey{f, id + srcSuffix}, childKey{f, id + dstSuffix})
	}
	return out
}

// SetIPContext allocates (or renews) the addresses of a connection and
// writes them into its IP context, with Meridio's contract:
//
//   - LBConn (key conn.Id): SrcIpAddrs = the "-dst" addresses (proxy side),
//     DstIpAddrs = the "-src" addresses (LB side), always overwritten.
//   - TargetConn (key Path.PathSegments[0].Id): SrcIpAddrs gets the "-src"
//     addresses (target side), DstIpAddrs the "-dst" ones (proxy side),
//     ExtraPrefixes the bridge addresses (the targets' gateways). On a
//     refresh, addresses inside the old gateway subnets (the request's
//     ExtraPrefixes shaped like gateways of this conduit, see gatewayNets)
//     or the current node subnets that are not this connection's
//     allocations are dropped (other addresses, e.g. VIPs, stay), and
//     policy-route nexthops that point to an old gateway are moved to the
//     current one.
//
// A pending release of the same id is cancelled first, so a reconnect within
// the release delay keeps its addresses. Requests for different ids run in
// parallel; requests for one id are serialized.
//
// A request of a connection whose children the proxy holds only renews
// their leases: if the IPAM does not answer it, the connection keeps its
// addresses and the leases are renewed later (see renewal.go).
//
// If an allocation fails, the children this request created are released
// (asynchronously, with retries) and conn is left unchanged. Children that
// existed before the request — recorded by the proxy or already carried in
// the connection's IP context (a refresh, or a heal after a proxy restart) —
// are never released on failure: an interface may be using them, and
// releasing them would let the IPAM hand them out twice. Closing the
// connection releases them. (A call that timed out may be committed by an
// IPAM after the rollback's release, though not by Causeway's, which
// creates nothing for a call its caller gave up on; such an address is held
// until the connection's close or the IPAM's lease collection frees it.)
//
// The families are allocated in parallel, "-src" before "-dst" in each.
func (p *Proxy) SetIPContext(ctx context.Context, conn *networkservice.Connection, t ConnType) error {
	id, err := ConnKey(conn, t)
	if err != nil {
		return fmt.Errorf("set IP context: %w", err)
	}
	log := p.log.With("id", id, "type", t.String())
	// Proved before anything changes: a refused client (a replayed
	// token under a closed connection's key) cancels no pending release.
	identity := ""
	if t == TargetConn {
		if identity, err = p.proveTarget(conn, id); err != nil {
			return err
		}
		p.mu.Lock()
		err = p.takeoverLocked(conn, id, identity)
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
	unlock, err := p.lockForSet(ctx, id, log)
	if err != nil {
		return err
	}
	defer unlock()

	if t == TargetConn {
		p.mu.Lock()
		err := p.takeoverLocked(conn, id, identity)
		if err == nil {
			err = p.admitTargetLocked(id, p.targetClient(conn, id, identity))
		}
		p.mu.Unlock()
		if err != nil {
			return err
		}
		defer p.doneAdmitting(id)
	}
	prior := p.priorAllocs(id)
	ipc := ensureIPContext(conn)
	inUse := addrSet(ipc.GetSrcIpAddrs(), ipc.GetDstIpAddrs())

	got, err := p.allocateOrKeep(ctx, id, t, prior, inUse, log)
	if err != nil {
		return err
	}
	warnMoved(prior, got, log)
	p.followNodeSubnet(ctx, id, got, log)
	bridge, svcRoutes := p.commitAllocs(id, t, conn, identity, got, log)

	src, dst := p.srcDstPrefixes(id, got)
	before := ipContextString(ipc)
	p.writeIPContext(ipc, t, src, dst, bridge, svcRoutes, log)
	logIPContextChange(log, len(prior) == 0, before, ipContextString(ipc))
	return nil
}

// allocateOrKeep allocates (or renews) the children of id. A renewal (prior
// holds them all) that the IPAM does not answer keeps the addresses held and
// leaves their leases owed (see renewal.go); any other failure rolls back
// what this request created and is returned.
func (p *Proxy) allocateOrKeep(ctx context.Context, id string, t ConnType, prior map[childKey]netip.Prefix,
	inUse map[netip.Addr]bool, log *slog.Logger) (map[childKey]netip.Prefix, error) {
	renewal := p.holdsAll(prior, id)
	actx, cancel := ctx, context.CancelFunc(func() {})
	if renewal {
		actx, cancel = p.renewalContext(ctx)
	}
	got, failed, err := p.allocateChildren(actx, id)
	cancel()
	switch {
	case err == nil:
		if renewal {
			p.renewalDone(id)
		}
		return got, nil
	case renewal && ctx.Err() == nil && ipamUnreachable(err):
		log.Warn("the IPAM does not answer: the connection keeps the addresses it holds, their leases are renewed once it does",
			"error", err)
		p.deferRenewal(id)
		return keepHeld(prior, got), nil
	}
	p.rollback(id, t, prior, inUse, got, failed, log)
	log.Error("IP context not set", "error", err)
	return nil, fmt.Errorf("set IP context of %s: %w", id, err)
}

// lockForSet cancels a pending release of id and takes the id lock, and
// returns the function that releases it.
func (p *Proxy) lockForSet(ctx context.Context, id string, log *slog.Logger) (unlock func(), err error) {
	// Cancel before taking the id lock so that a running release (which
	// holds it) stops; and again after, in case one was scheduled meanwhile.
	if err := p.cancelRelease(id, log); err != nil {
		return nil, err
	}
	unlock, err = p.locks.lock(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("set IP context of %s: %w", id, err)
	}
	if err := p.cancelRelease(id, log); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// priorAllocs returns a copy of the allocations the proxy holds for id.
func (p *Proxy) priorAllocs(id string) map[childKey]netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	prior := map[childKey]netip.Prefix{}
	if st := p.conns[id]; st != nil {
		maps.Copy(prior, st.allocs)
	}
	return prior
}

// ensureIPContext returns the IP context of conn, creating it if missing.
func ensureIPContext(conn *networkservice.Connection) *networkservice.IPContext {
	if conn.GetContext() == nil {
		conn.Context = &networkservice.ConnectionContext{}
	}
	if conn.GetContext().GetIpContext() == nil {
		conn.GetContext().IpContext = &networkservice.IPContext{}
	}
	return conn.GetContext().GetIpContext()
}

// commitAllocs records got as the allocations of id, and the NSM connection
// owner as the one that holds them, moves its nexthops to them, and returns
// the bridge addresses and service routes to write; identity is a target's
// proved client (see TargetIdentity).
func (p *Proxy) commitAllocs(id string, t ConnType, conn *networkservice.Connection, identity string, got map[childKey]netip.Prefix,
	log *slog.Logger) (map[ipamv1.IPFamily]netip.Prefix, serviceRoutes) {
	owner := conn.GetId()
	p.mu.Lock()
	st := p.conns[id]
	if st == nil {
		st = &connState{id: id}
		p.conns[id] = st
	}
	changed := st.owner != owner || !maps.Equal(st.allocs, got)
	st.typ = t
	st.owner = owner
	st.allocs = got
	if t == TargetConn {
		ci := clientInfoOf(conn)
		ci.Identity = identity
		changed = changed || ci != st.client
		st.client = ci
		st.clientID = p.targetClient(conn, id, identity)
	}
	if pr := st.release; pr != nil && pr.full && pr.closedBy != "" && owner != "" && pr.closedBy != owner {
		// Scheduled by the close of another connection with this key
		// while this request was on its way: the addresses are this
		// connection's now.
		pr.cancel()
		st.release = nil
		p.counters.releaseCancel++
		log.Info("pending address release of a superseded connection cancelled", "closed", pr.closedBy)
	}
	moved := p.refreshHopsLocked(st)
	refiltered := p.refreshFilterLocked(st)
	hops := slices.Clone(st.hops)
	bridge := maps.Clone(p.bridge)
	svcRoutes := p.svcRoutes
	p.mu.Unlock()
	if moved {
		log.Info("nexthops follow the connection's new addresses", "nexthops", hops)
	}
	if moved || refiltered {
		p.markDirty()
	} else if changed {
		p.watch.signal()
	}
	return bridge, svcRoutes
}

// srcDstPrefixes returns the "-src" and "-dst" addresses in got of id, in
// family order.
func (p *Proxy) srcDstPrefixes(id string, got map[childKey]netip.Prefix) (src, dst []netip.Prefix) {
	for _, f := range p.cfg.Families {
		src = append(src, got[childKey{f, id + srcSuffix}])
		dst = append(dst, got[childKey{f, id + dstSuffix}])
	}
	return src, dst
}

// writeIPContext writes the addresses of a connection of type t into ipc
// (see SetIPContext for the contract of each type).
func (p *Proxy) writeIPContext(ipc *networkservice.IPContext, t ConnType, src, dst []netip.Prefix,
	bridge map[ipamv1.IPFamily]netip.Prefix, svcRoutes serviceRoutes, log *slog.Logger) {
	switch t {
	case LBConn:
		old := slices.Clone(ipc.GetSrcIpAddrs())
		ipc.SrcIpAddrs = prefixStrings(dst)
		ipc.DstIpAddrs = prefixStrings(src)
		if len(old) > 0 && !slices.Equal(old, ipc.SrcIpAddrs) {
			log.Warn("LB connection addresses changed", "old", old, "new", ipc.SrcIpAddrs)
		}
	case TargetConn:
		gws := p.orderedBridge(bridge)
		gwNets, foreign := gatewayNets(ipc.GetExtraPrefixes(), gws)
		if len(foreign) > 0 {
			log.Warn("extra prefixes of the request that are no gateway of this conduit ignored: addresses and routes inside them are left as the target's own",
				"ignored", foreign, "gateways", gws)
		}
		setTargetIPContext(ipc, src, dst, gws, gwNets)
		setServiceRoutes(ipc, svcRoutes, gwNets)
	}
}

// logIPContextChange logs a new, changed or merely refreshed IP context.
func logIPContextChange(log *slog.Logger, first bool, before, after string) {
	switch {
	case first:
		log.Info("IP context set", "ipContext", after)
	case before != after:
		log.Info("IP context updated", "old", before, "new", after)
	default:
		log.Debug("IP context refreshed", "ipContext", after)
	}
}

// allocateChildren allocates the children of id: the families in parallel,
// "-src" before "-dst" within a family (so that addresses are handed out in
// a deterministic order). After an error no new call is started, but calls
// in flight are not cancelled: a cancelled call may still be committed by
// the IPAM after the rollback's release, while a call that completes has a
// definite outcome. It returns what was allocated, and the children whose
// call failed (the IPAM may have allocated them anyway, e.g. on a timeout).
func (p *Proxy) allocateChildren(ctx context.Context, id string) (got map[childKey]netip.Prefix, failed []childKey, err error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	got = map[childKey]netip.Prefix{}
	family := func(f ipamv1.IPFamily) {
		for _, k := range []childKey{{f, id + srcSuffix}, {f, id + dstSuffix}} {
			mu.Lock()
			stop := len(errs) > 0
			mu.Unlock()
			if stop {
				return
			}
			pfx, err := p.allocate(ctx, k.Family, k.Name)
			mu.Lock()
			if err != nil {
				failed = append(failed, k)
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			got[k] = pfx
			mu.Unlock()
		}
	}
	if p.serialFamilies {
		for _, f := range p.cfg.Families {
			family(f)
		}
		return got, failed, errors.Join(errs...)
	}
	for _, f := range p.cfg.Families[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			family(f)
		}()
	}
	family(p.cfg.Families[0])
	wg.Wait()
	if len(errs) > 0 {
		return got, failed, errors.Join(errs...)
	}
	return got, nil, nil
}

// warnMoved logs every child for which the IPAM answered another address
// than the one the proxy holds (its data was restored or lost): the proxy
// follows the IPAM, which owns the addresses.
func warnMoved(prior, got map[childKey]netip.Prefix, log *slog.Logger) {
	for k, held := range prior {
		if now, ok := got[k]; ok && now != held {
			log.Warn("the IPAM answered another address than the one held; following it", "family", k.Family.String(),
				"child", k.Name, "held", held, "answered", now)
		}
	}
}

// followNodeSubnet renews the bridge address of a family when an allocation
// falls outside the bridge's subnet: the node subnet changed (trench or
// conduit re-created, IPAM data lost) and the gateways must follow.
func (p *Proxy) followNodeSubnet(ctx context.Context, id string, got map[childKey]netip.Prefix, log *slog.Logger) {
	for _, f := range p.cfg.Families {
		a := got[childKey{f, id + srcSuffix}]
		p.mu.Lock()
		b, ok := p.bridge[f]
		p.mu.Unlock()
		if ok && b.Masked().Contains(a.Addr()) {
			continue
		}
		log.Warn("allocation outside the bridge subnet, renewing the bridge address", "family", f.String(),
			"allocation", a, "bridge", b)
		if _, err := p.renewBridgeFamily(ctx, f); err != nil {
			log.Error("bridge address renewal failed", "family", f.String(), "error", err)
		}
	}
}

// UnsetIPContext schedules the release of a connection's addresses after
// ReleaseDelay and returns at once: a slow or unreachable IPAM never blocks
// it. A SetIPContext for the same id before the release is done cancels it.
// If a release is already pending for the id, it is kept as it is. After a
// failed first request (a rollback is running), the release is immediate.
//
// The close of a connection that another one superseded under the same key
// is ignored: a target that heals through another path gets a new
// proxy-side connection id, and the old path's connection is closed later
// (its NSMgr's timeout, or the endpoint's expiry) while the new one uses
// the addresses.
func (p *Proxy) UnsetIPContext(_ context.Context, conn *networkservice.Connection, t ConnType) error {
	id, err := ConnKey(conn, t)
	if err != nil {
		return fmt.Errorf("unset IP context: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	st := p.conns[id]
	if st != nil && st.owner != "" && conn.GetId() != "" && st.owner != conn.GetId() {
		p.log.Info("close of a superseded connection ignored: its key is another connection's now", "id", id,
			"type", t.String(), "closed", conn.GetId(), "current", st.owner)
		return nil
	}
	if p.retaining {
		if st != nil {
			st.owner = ""
		}
		p.log.Info("addresses kept for the proxy's successor: the proxy is stopping", "id", id, "type", t.String())
		return nil
	}
	if st == nil {
		// Unknown id (e.g. a close after a proxy restart): release by name.
		st = &connState{id: id, typ: t, allocs: map[childKey]netip.Prefix{}}
		p.conns[id] = st
	}
	delay := p.cfg.ReleaseDelay
	if st.release != nil {
		if st.release.full {
			return nil
		}
		// A rollback is running: superseded by a full release. If the id
		// holds nothing but what the failed request took, the connection
		// was never established and nobody can be using its addresses:
		// release them at once.
		if onlyChildren(st.allocs, st.release.children) {
			delay = 0
		}
		st.release.cancel()
	}
	st.owner = ""
	if t == TargetConn && p.cfg.TargetIdentity.End != nil {
		p.cfg.TargetIdentity.End(conn)
	}
	p.watch.signal()
	p.scheduleReleaseLocked(st, p.children(id), true, conn.GetId(), delay)
	p.log.Info("address release scheduled", "id", id, "type", t.String(), "delay", delay)
	return nil
}

// onlyChildren reports whether every allocation in allocs is one of ks.
func onlyChildren(allocs map[childKey]netip.Prefix, ks []childKey) bool {
	for k := range allocs {
		if !slices.Contains(ks, k) {
			return false
		}
	}
	return true
}

// rollback schedules the release of the children a failed SetIPContext
// created; see SetIPContext for what is never released.
func (p *Proxy) rollback(id string, t ConnType, prior map[childKey]netip.Prefix, inUse map[netip.Addr]bool,
	got map[childKey]netip.Prefix, failed []childKey, log *slog.Logger) {
	var undo []childKey
	for _, k := range p.children(id) {
		if _, known := prior[k]; known {
			continue
		}
		if pfx, ok := got[k]; ok {
			if !inUse[pfx.Addr()] {
				undo = append(undo, k)
			}
			continue
		}
		// A failed or cancelled call may have allocated anyway (e.g. a
		// timeout after the IPAM committed): release it too, unless the
		// connection already carries addresses of which it could be one.
		if slices.Contains(failed, k) && len(inUse) == 0 {
			undo = append(undo, k)
		}
	}
	if len(undo) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.conns[id]
	if st == nil {
		st = &connState{id: id, typ: t, allocs: map[childKey]netip.Prefix{}}
		p.conns[id] = st
	}
	for _, k := range undo {
		if pfx, ok := got[k]; ok {
			st.allocs[k] = pfx
		}
	}
	if st.release != nil {
		return // a full release is already scheduled; it covers these
	}
	if p.scheduleReleaseLocked(st, undo, false, "", 0) {
		p.counters.rollbacks++
		log.Warn("rolling back allocations of the failed request", "children", childNames(undo))
	} else {
		p.dropIdleLocked(st)
	}
}

// cancelRelease cancels the pending release of id, if any.
func (p *Proxy) cancelRelease(id string, log *slog.Logger) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	st := p.conns[id]
	if st == nil || st.release == nil {
		return nil
	}
	st.release.cancel()
	st.release = nil
	p.counters.releaseCancel++
	log.Info("pending address release cancelled by a new request")
	return nil
}

// gatewayNets returns the subnets of the gateways a target connection may
// carry: those of the current gateways (bridge) and of the request's extra
// prefixes (written by this proxy or an earlier one: a refresh, a heal from
// another node, a re-created conduit). A request's entry counts only if it
// looks like one of ours: a host address, not its subnet's own, with the
// prefix length of the current gateway of its family. The others are
// returned as foreign: a target could send anything there (0.0.0.0/0),
// and taking it for a gateway subnet would drop the target's own addresses
// and routes.
func gatewayNets(extra []string, bridge []netip.Prefix) (nets []netip.Prefix, foreign []string) {
	bits := map[bool]int{} // is4 → the current gateway's prefix length
	for _, b := range bridge {
		bits[b.Addr().Is4()] = b.Bits()
		nets = append(nets, b.Masked())
	}
	for _, s := range extra {
		pfx, ok := parsePrefixOrAddr(s)
		if want, has := bits[pfx.Addr().Is4()]; !ok || !has || pfx.Bits() != want || pfx.Addr() == pfx.Masked().Addr() {
			foreign = append(foreign, s)
			continue
		}
		if !slices.Contains(nets, pfx.Masked()) {
			nets = append(nets, pfx.Masked())
		}
	}
	return nets, foreign
}

// setTargetIPContext writes a target connection's addresses and gateways
// into ipc, rewriting stale ones inside gwNets, the gateway subnets (see
// SetIPContext and gatewayNets).
func setTargetIPContext(ipc *networkservice.IPContext, src, dst, bridge, gwNets []netip.Prefix) {
	ipc.SrcIpAddrs = mergeAddrs(ipc.GetSrcIpAddrs(), src, gwNets)
	ipc.DstIpAddrs = mergeAddrs(ipc.GetDstIpAddrs(), dst, gwNets)
	ipc.ExtraPrefixes = prefixStrings(bridge)

	gw := map[bool]netip.Addr{} // is4 → current gateway
	for _, b := range bridge {
		gw[b.Addr().Is4()] = b.Addr()
	}
	for _, pol := range ipc.GetPolicies() {
		for _, r := range pol.GetRoutes() {
			nh, ok := parsePrefixOrAddr(r.GetNextHop())
			if !ok || !inAny(gwNets, nh.Addr()) {
				continue
			}
			is4 := nh.Addr().Is4()
			if from, ok := parsePrefixOrAddr(pol.GetFrom()); ok {
				is4 = from.Addr().Is4()
			}
			if g, ok := gw[is4]; ok && g != nh.Addr() {
				r.NextHop = g.String()
			}
		}
	}
}

// mergeAddrs keeps the entries of cur that are not stale node-subnet
// addresses (inside gwNets but not one of want) and appends the wanted ones
// that are missing.
func mergeAddrs(cur []string, want []netip.Prefix, gwNets []netip.Prefix) []string {
	wantStr := prefixStrings(want)
	out := make([]string, 0, len(cur)+len(want))
	for _, s := range cur {
		if slices.Contains(wantStr, s) {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
			continue
		}
		if pfx, ok := parsePrefixOrAddr(s); ok && inAny(gwNets, pfx.Addr()) {
			continue // stale internal address
		}
		out = append(out, s)
	}
	for _, s := range wantStr {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (p *Proxy) orderedBridge(m map[ipamv1.IPFamily]netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range p.cfg.Families {
		if b, ok := m[f]; ok {
			out = append(out, b)
		}
	}
	return out
}

func inAny(nets []netip.Prefix, a netip.Addr) bool {
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// parsePrefixOrAddr accepts "addr/len" or a bare address.
func parsePrefixOrAddr(s string) (netip.Prefix, bool) {
	if pfx, err := netip.ParsePrefix(s); err == nil {
		if a := pfx.Addr(); a.Is4In6() {
			if pfx.Bits() < 96 {
				return netip.Prefix{}, false
			}
			return netip.PrefixFrom(a.Unmap(), pfx.Bits()-96), true
		}
		return pfx, true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	return netip.Prefix{}, false
}

func addrSet(lists ...[]string) map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, l := range lists {
		for _, s := range l {
			if pfx, ok := parsePrefixOrAddr(s); ok {
				m[pfx.Addr()] = true
			}
		}
	}
	return m
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func childNames(ks []childKey) []string {
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.Family.String()+"/"+k.Name)
	}
	return out
}

func ipContextString(ipc *networkservice.IPContext) string {
	var b strings.Builder
	fmt.Fprintf(&b, "src=%v dst=%v extra=%v", ipc.GetSrcIpAddrs(), ipc.GetDstIpAddrs(), ipc.GetExtraPrefixes())
	for _, pol := range ipc.GetPolicies() {
		fmt.Fprintf(&b, " policy(from=%s", pol.GetFrom())
		for _, r := range pol.GetRoutes() {
			fmt.Fprintf(&b, " %s via %s", r.GetPrefix(), r.GetNextHop())
		}
		b.WriteString(")")
	}
	return b.String()
}
