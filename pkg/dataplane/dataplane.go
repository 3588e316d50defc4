package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/pkg/conntrackflush"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ProtocolCauseway is the rtnetlink protocol number (rtm_protocol /
// FRA_PROTOCOL) that marks the routes and rules Causeway creates. 202 (0xCA)
// is not assigned in Linux's rtnetlink.h nor in iproute2's rt_protos; `ip`
// shows it as "proto 202".
const ProtocolCauseway = 202

// Defaults of Options.
const (
	DefaultBridgeName       = "bridge0"
	DefaultTable            = 1
	DefaultResyncInterval   = time.Minute
	DefaultAnnounceCount    = 3
	DefaultAnnounceInterval = 500 * time.Millisecond
	// DefaultReceiveBuffer is the receive buffer of the netlink
	// subscription sockets (SO_RCVBUFFORCE): large enough for a burst of
	// thousands of notifications; an overrun costs a re-subscription and
	// a full re-sync, never a lost change.
	DefaultReceiveBuffer = 4 << 20
)

// ErrClosed is returned by calls on a closed Dataplane.
var ErrClosed = errors.New("dataplane: closed")

// Options configure a Dataplane. The zero value is usable: the current
// namespace, bridge "bridge0", table 1, protocol ProtocolCauseway.
type Options struct {
	// NetNS is the network namespace to manage. The Dataplane duplicates
	// the handle, so the caller may close its own. Zero (or
	// netns.None()) means the namespace of the thread calling New.
	NetNS netns.NsHandle
	// BridgeName is the bridge's name (default "bridge0").
	BridgeName string
	// Table is the routing table of the ECMP default routes and the VIP
	// rules (default 1). The local (255), main (254) and default (253)
	// tables are refused.
	Table int
	// Protocol marks the routes and rules the Dataplane owns (default
	// ProtocolCauseway). It must be above RTPROT_STATIC (4).
	Protocol int
	// RulePriority is the priority of the VIP rules; 0 lets the kernel
	// choose (each new rule goes just before the previous lowest one, as
	// in Meridio).
	RulePriority int
	// Logger receives the Dataplane's logs (default: discarded).
	Logger *slog.Logger
	// ResyncInterval is the period of the backstop re-sync that reads the
	// kernel state and repairs it (default DefaultResyncInterval); a
	// negative value disables it. Kernel events trigger targeted re-syncs
	// regardless.
	ResyncInterval time.Duration
	// MACFile, when set, is where the bridge's MAC is kept across restarts:
	// a bridge created by New takes the MAC stored there (when the bridge
	// itself was deleted, e.g. in a new pod), and the MAC of a created or
	// adopted bridge is written there. An existing bridge always keeps its
	// own MAC; if someone changes it, the Dataplane adopts and announces
	// the new one.
	MACFile string
	// AdoptLeftovers keeps the routes and rules left by an earlier run (the
	// ones carrying Protocol in Table) until the first Apply, which then
	// keeps those still wanted and removes the others, so egress is not
	// interrupted across a restart. By default New removes them at once.
	AdoptLeftovers bool
	// HoldLeftovers, with AdoptLeftovers, keeps what New adopted (the
	// bridge's ports, the nexthops of the default routes, the VIP rules)
	// in addition to every applied state until a State releases them (State.ReleaseLeftovers): an owner
	// restarted while its control plane is away (it cannot relearn its
	// connections yet) does not cut the data paths they still carry. A
	// held port whose link goes is gone with it.
	HoldLeftovers bool
	// TolerateSysctlErrors makes New log the sysctls it cannot set instead
	// of failing. Either way they are reported in Snapshot.
	TolerateSysctlErrors bool
	// SysctlFamilies selects the families whose sysctls New sets and
	// checks (zero: both). An IPv4-only proxy leaves the IPv6 keys alone,
	// since a node may run with IPv6 disabled in its kernel, and the other
	// way round.
	SysctlFamilies SysctlFamilies
	// BridgeNetfilter makes New turn net.bridge.bridge-nf-call-ip(6)tables
	// on in the namespace, for the service load balancer's nftables
	// provider: an endpoint's reply to a client on the same bridge
	// (hairpin) then passes its connection tracking and gets its source
	// turned back into the service's. It needs the br_netfilter module.
	BridgeNetfilter bool
	// EchoSockets makes New open ICMP echo ("ping") sockets to every group
	// of the namespace (net.ipv4.ping_group_range, both families), which
	// the datapath check of the LB nexthops probes through
	// (pkg/nexthopcheck). It is not in PodSysctls (its value has a space):
	// the chart's init container sets it on a line of its own. A failure
	// is logged, not returned: the check then reports its peers
	// unchecked.
	EchoSockets bool
	// GuardedPorts are TCP ports of the namespace's own listeners (the
	// proxy's metrics) that nothing arriving over the bridge may reach: New
	// makes the table GuardTable refuse them from the bridge (a connection
	// is reset), and removes an earlier run's table when there are none.
	// Traffic the bridge forwards or routes is not affected.
	GuardedPorts []uint16
	// DisableConntrackFlush stops Apply from flushing the conntrack entries
	// of removed VIPs and removed nexthops (FlushConntrack still works).
	DisableConntrackFlush bool
	// Conntrack deletes the namespace's conntrack entries (nil: a
	// conntrackflush.Flusher of the namespace); a test's fails.
	Conntrack conntrackflush.Interface
	// AnnounceCount is how many announcement rounds follow the setting or
	// change of the bridge's address or MAC, or the join of a port
	// (default DefaultAnnounceCount; negative disables them), and
	// AnnounceInterval the time between rounds (default
	// DefaultAnnounceInterval). In a round the kernel sends a gratuitous
	// ARP / unsolicited NA for each bridge address: the Dataplane sets the
	// bridge's MAC to its own value with the bridge's arp_notify and
	// ndisc_notify on (see announce.go), which needs CAP_NET_ADMIN only.
	AnnounceCount    int
	AnnounceInterval time.Duration
	// ReceiveBuffer is the receive buffer size of the netlink
	// subscriptions (default DefaultReceiveBuffer). Tests set it small to
	// force overruns.
	ReceiveBuffer int
}

func (o *Options) setDefaults() error {
	if o.BridgeName == "" {
		o.BridgeName = DefaultBridgeName
	}
	if len(o.BridgeName) >= unix.IFNAMSIZ {
		return fmt.Errorf("bridge name %q: longer than %d bytes", o.BridgeName, unix.IFNAMSIZ-1)
	}
	if o.Table == 0 {
		o.Table = DefaultTable
	}
	switch {
	case o.Table < 0:
		return fmt.Errorf("table %d: invalid", o.Table)
	case o.Table == unix.RT_TABLE_LOCAL || o.Table == unix.RT_TABLE_MAIN || o.Table == unix.RT_TABLE_DEFAULT:
		return fmt.Errorf("table %d: a reserved table (local, main or default) cannot be owned", o.Table)
	}
	if o.Protocol == 0 {
		o.Protocol = ProtocolCauseway
	}
	if o.Protocol <= unix.RTPROT_STATIC || o.Protocol > 255 {
		return fmt.Errorf("protocol %d: must be in 5..255", o.Protocol)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.AnnounceCount == 0 {
		o.AnnounceCount = DefaultAnnounceCount
	}
	if o.AnnounceInterval <= 0 {
		o.AnnounceInterval = DefaultAnnounceInterval
	}
	if o.ReceiveBuffer == 0 {
		o.ReceiveBuffer = DefaultReceiveBuffer
	}
	return nil
}

// Dataplane owns the kernel state of one namespace. It is safe for
// concurrent use.
type Dataplane struct {
	opts  Options
	log   *slog.Logger
	ns    netns.NsHandle // owned duplicate
	h     *netlink.Handle
	table int
	proto int

	linkTable *linkTable
	ann       *announcer
	ct        conntrackflush.Interface
	ctFailing atomic.Bool // the last flush of removed VIPs and nexthops failed
	pen       pending
	// kick wakes the reconciler.
	kick chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards everything below and serialises kernel writes
	closed bool
	m      *model
	// goal is what convergence makes the kernel equal to: the adopted
	// state until the first Apply, then the applied one with the
	// leftovers added while they are held.
	goal *spec
	// applied is the last State given to Apply, normalised, without the
	// held leftovers (nil before the first Apply).
	applied *spec
	// leftovers are what New adopted from an earlier run, held
	// (Options.HoldLeftovers) until a State releases them; leftoverAddrs the
	// addresses their links carried.
	leftovers     *spec
	leftoverAddrs addrLinks
	flush         flushQueue
	// goalShared is goal, readable without mu: the conntrack flush's last
	// look at what is wanted again.
	goalShared atomic.Pointer[spec]
	bridgeMAC  net.HardwareAddr
	sysctlErrs []error // sysctls New could not set
	started    bool    // New has returned

	ctr counters
	// bridgeIdx mirrors m.bridgeIndex for the subscriptions, which must not
	// take mu.
	bridgeIdx atomic.Int64
}

// New prepares the namespace and starts the Dataplane: it sets the sysctls,
// adopts the bridge (with its MAC) or creates it (with a random locally
// administered MAC, or the one in Options.MACFile) and sets it up, removes
// the routes and rules left by an earlier run (see Options.AdoptLeftovers),
// and starts the link, address, route and rule subscriptions. ctx bounds the
// start-up only; the Dataplane runs until Close or Teardown.
//
// Nothing else changes until the first Apply: the addresses and ports of an
// adopted bridge stay as they are.
func New(ctx context.Context, opts Options) (_ *Dataplane, err error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	dp := &Dataplane{
		opts:  opts,
		log:   opts.Logger.With("bridge", opts.BridgeName, "table", opts.Table),
		table: opts.Table,
		proto: opts.Protocol,
		kick:  make(chan struct{}, 1),
		m:     newModel(),
	}
	dp.pen.init()
	if opts.NetNS > 0 {
		fd, err := unix.Dup(int(opts.NetNS))
		if err != nil {
			return nil, fmt.Errorf("duplicate netns handle: %w", err)
		}
		dp.ns = netns.NsHandle(fd)
	} else if dp.ns, err = callerNamespace(); err != nil {
		return nil, err
	}
	dp.ct = opts.Conntrack
	if dp.ct == nil {
		dp.ct = conntrackflush.New(dp.ns)
	}
	dp.ctx, dp.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			dp.cancel()
			if dp.linkTable != nil {
				dp.linkTable.closeSubscribers()
			}
			dp.wg.Wait()
			dp.release()
		}
	}()
	if dp.h, err = netlink.NewHandleAt(dp.ns); err != nil {
		return nil, fmt.Errorf("netlink handle in namespace: %w", err)
	}
	// Namespace-wide sysctls first, so the bridge inherits the defaults.
	if _, serr := setSysctls(dp.ns, "", opts.SysctlFamilies.filter(globalSysctls())); serr != nil {
		dp.sysctlErrs = append(dp.sysctlErrs, serr)
	}
	if opts.BridgeNetfilter {
		if _, serr := setSysctls(dp.ns, "", bridgeNetfilterSysctls()); serr != nil {
			dp.sysctlErrs = append(dp.sysctlErrs, fmt.Errorf("bridge netfilter needs the br_netfilter kernel module on the node "+
				"(modprobe br_netfilter; persist it in /etc/modules-load.d/): %w", serr))
		}
	}
	if opts.EchoSockets {
		if _, serr := setSysctls(dp.ns, "", echoSocketSysctls()); serr != nil {
			dp.log.Warn("ICMP echo sockets not opened to the proxy: the datapath check of the nexthops will be off", "error", serr)
		}
	}
	// Replaced whole, whatever an earlier run guarded; the start's
	// convergence removes an earlier run's table when no port is guarded.
	if len(opts.GuardedPorts) > 0 {
		if err := dp.write(opGuardSet, GuardTable, func() error { return guardPorts(dp.ns, opts.BridgeName, opts.GuardedPorts) }); err != nil {
			return nil, fmt.Errorf("guard of the namespace's own ports: %w", err)
		}
	}
	dp.ann = newAnnouncer(opts.AnnounceCount, opts.AnnounceInterval, clock.Real(), dp.announceRound)

	// Subscribe before reading the kernel state, so that no change between
	// the read and the subscription goes unseen.
	dp.linkTable = newLinkTable(dp.ns, dp.h, dp.log, opts.ReceiveBuffer)
	dp.linkTable.internal = dp.onLinkEvent
	dp.goRun(dp.linkTable.run)
	dp.goRun(dp.runAddrSubscription)
	dp.goRun(dp.runRouteSubscription)
	dp.goRun(dp.runRuleSubscription)
	select {
	case <-dp.linkTable.syncedCh:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the link table: %w", ctx.Err())
	}

	dp.mu.Lock()
	err = dp.startLocked()
	dp.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if len(dp.sysctlErrs) > 0 {
		serr := errors.Join(dp.sysctlErrs...)
		if !opts.TolerateSysctlErrors {
			return nil, serr
		}
		dp.log.Error("some sysctls could not be set", "error", serr)
	}
	dp.mu.Lock()
	dp.started = true
	dp.mu.Unlock()
	dp.goRun(dp.reconcileLoop)
	dp.goRun(dp.ann.run)
	return dp, nil
}

func (dp *Dataplane) goRun(fn func(context.Context)) {
	dp.wg.Add(1)
	go func() {
		defer dp.wg.Done()
		fn(dp.ctx)
	}()
}

// Apply makes the kernel look like s, with the fewest netlink writes: the
// difference between s and what the Dataplane owns. It is the one way the
// Dataplane's owner changes the kernel: the links to delete (State.Remove)
// and the end of the hold on an earlier run's state
// (State.ReleaseLeftovers) are part of s. An identical Apply issues no
// netlink operation at all, and its cost is one pass over s. Ports that do
// not exist are skipped without error (and enslaved if they appear later).
// Apply goes on after a failed operation and returns all failures joined,
// each wrapped in an *OpError naming its object; the reconciler retries
// what failed of the convergence, the caller what failed of the links to
// delete.
//
// When VIPs or nexthops are removed, Apply then flushes their conntrack
// entries (unless Options.DisableConntrackFlush), once their rule or route
// is gone, all in one pass over the conntrack table.
func (dp *Dataplane) Apply(s State) error {
	goal, err := normalize(s)
	if err != nil {
		return err
	}
	dp.mu.Lock()
	if dp.closed {
		dp.mu.Unlock()
		return ErrClosed
	}
	dp.applied = goal
	errs := []error{dp.removeLinksLocked(s.Remove, goal)}
	dp.supersedeLeftoversLocked(s.Ports)
	if s.ReleaseLeftovers {
		errs = append(errs, dp.releaseLeftoversLocked(goal))
	}
	errs = append(errs, dp.applyLocked(goal.withLeftovers(dp.leftovers)))
	return errors.Join(errs...)
}

// releaseLeftoversLocked stops holding what New adopted
// (Options.HoldLeftovers), for State.ReleaseLeftovers: a held link that
// goal does not have as a port is deleted; one that cannot be deleted
// stays held (and a port), and the error says so. Once everything is
// released, it does nothing. dp.mu must be held.
func (dp *Dataplane) releaseLeftoversLocked(goal *spec) error {
	if dp.leftovers == nil {
		return nil
	}
	// A held port that nothing claimed by now carried a connection of the
	// earlier run that did not come back: its link goes, with its
	// addresses, as a closed connection's would.
	var errs []error
	var deleted, kept []int
	for _, p := range dp.unclaimedLeftoversLocked(goal) {
		if err := dp.deleteLeftoverLocked(p); err != nil {
			errs = append(errs, err)
			kept = append(kept, p)
			continue
		}
		deleted = append(deleted, p)
	}
	if len(kept) == 0 {
		if dp.leftovers.holdsNothing() && len(deleted) == 0 {
			dp.log.Debug("no leftovers of an earlier run to release")
		} else {
			dp.log.Info("leftovers of an earlier run released", "unclaimedLinksDeleted", deleted)
		}
		dp.leftovers, dp.leftoverAddrs = nil, nil
		return nil
	}
	// Only the links that could not be deleted stay held, as they are;
	// the next release deletes them.
	dp.leftovers = &spec{ports: kept}
	dp.log.Warn("leftovers of an earlier run released but for links that could not be deleted",
		"unclaimedLinksDeleted", deleted, "stillHeld", kept)
	return errors.Join(errs...)
}

// setGoalLocked makes goal what convergence aims at. dp.mu must be held.
func (dp *Dataplane) setGoalLocked(goal *spec) {
	dp.goal = goal
	dp.goalShared.Store(goal)
}

// applyLocked converges to goal and then, with dp.mu released, flushes
// the conntrack entries of what it removed. dp.mu must be held; it is
// released.
func (dp *Dataplane) applyLocked(goal *spec) error {
	prev := dp.goal
	moved := movedNexthops(prev, goal)
	dp.setGoalLocked(goal)
	failed, err := dp.convergeLocked(goal, 0)
	dp.markStale(failed)
	dp.forgetNeighborsLocked(moved)
	due := dp.flush.take(goal)
	dp.mu.Unlock()
	dp.ctr.applies.Add(1)
	if !dp.flushConntrackLogged(due) {
		dp.wake() // the reconciler retries it
	}
	return err
}

// Subscribe returns the link events of the namespace from now on, and a
// function that ends the subscription (closing the channel). Each
// subscriber has its own unbounded queue: a slow subscriber delays only
// itself, never the link table or other subscribers. The channel is also
// closed by Close. See Links for the current links.
func (dp *Dataplane) Subscribe() (<-chan LinkEvent, func()) {
	return dp.linkTable.subscribe(&dp.wg)
}

// Links returns the link table's current view of the namespace's links,
// sorted by index (no kernel read).
func (dp *Dataplane) Links() []Link { return dp.linkTable.list() }

// Link returns the link table's view of link index (no kernel read).
func (dp *Dataplane) Link(index int) (Link, bool) { return dp.linkTable.link(index) }

// LinkByName returns the link table's view of the link named name.
func (dp *Dataplane) LinkByName(name string) (Link, bool) { return dp.linkTable.linkByName(name) }

// BridgeIndex returns the bridge's interface index.
func (dp *Dataplane) BridgeIndex() int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return dp.m.bridgeIndex
}

// BridgeMAC returns the bridge's MAC address.
func (dp *Dataplane) BridgeMAC() net.HardwareAddr {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return append(net.HardwareAddr(nil), dp.bridgeMAC...)
}

// Close stops the Dataplane's goroutines and releases its sockets. It does
// not change the kernel: the bridge, its ports, routes and rules stay (a
// restarted Dataplane adopts the bridge with its MAC, addresses and ports,
// and replaces the routes and rules, see Options.AdoptLeftovers).
// Subscription channels are closed. A second Close returns nil.
func (dp *Dataplane) Close() error {
	if !dp.stop() {
		return nil
	}
	dp.release()
	return nil
}

// Teardown stops the Dataplane like Close and removes what it owns from the
// kernel: its rules and routes (those carrying its protocol in its table,
// including ones it did not create in this run), the bridge, which
// releases the ports, and its nftables tables. The MAC file, if any, is
// kept.
func (dp *Dataplane) Teardown() error {
	if !dp.stop() {
		return ErrClosed
	}
	dp.mu.Lock()
	err := dp.teardownLocked()
	dp.mu.Unlock()
	dp.release()
	return err
}

// stop marks the Dataplane closed and waits for its goroutines; it returns
// false if it was already closed.
func (dp *Dataplane) stop() bool {
	dp.mu.Lock()
	if dp.closed {
		dp.mu.Unlock()
		return false
	}
	dp.closed = true
	dp.mu.Unlock()
	dp.cancel()
	dp.linkTable.closeSubscribers()
	dp.wg.Wait()
	return true
}

func (dp *Dataplane) release() {
	if dp.ct != nil {
		dp.ct.Close()
	}
	if dp.h != nil {
		dp.h.Close()
	}
	if dp.ns.IsOpen() {
		_ = dp.ns.Close()
	}
}

// OpError is the error of one kernel operation on one object.
type OpError struct {
	Op     string // e.g. "rule add"
	Object string // e.g. "from 192.0.2.1/32 table 1"
	Err    error
}

func (e *OpError) Error() string { return e.Op + " " + e.Object + ": " + e.Err.Error() }

func (e *OpError) Unwrap() error { return e.Err }

// op names the kinds of netlink writes, for OpError and Stats.
type op int

const (
	opLinkAdd op = iota
	opLinkDel
	opLinkSetUp
	opLinkSetMaster
	opLinkSetNoMaster
	opLinkSetMTU
	opLinkSetHairpin
	opAddrAdd
	opAddrDel
	opRouteReplace
	opRouteDel
	opRuleAdd
	opRuleDel
	opFilterSet
	opFilterDel
	opGuardSet
	opGuardDel
	numOps
)

var opNames = [numOps]string{
	"link add", "link del", "link set up", "link set master", "link set nomaster", "link set mtu", "link set hairpin",
	"addr add", "addr del", "route replace", "route del", "rule add", "rule del",
	"nft port filters set", "nft port filters del", "nft guard set", "nft guard del",
}

func (o op) String() string { return opNames[o] }

// write runs one netlink write, counting it, and wraps its error.
func (dp *Dataplane) write(o op, object string, fn func() error) error {
	dp.ctr.writes.Add(1)
	dp.ctr.byOp[o].Add(1)
	if err := fn(); err != nil {
		return &OpError{Op: o.String(), Object: object, Err: err}
	}
	return nil
}

// read counts one netlink read (a get or a dump).
func (dp *Dataplane) read() { dp.ctr.reads.Add(1) }

type counters struct {
	writes, reads, applies        atomic.Uint64
	byOp                          [numOps]atomic.Uint64
	restores, reconciles          atomic.Uint64
	announcements, ctDeleted      atomic.Uint64
	neighForgotten, neighRestored atomic.Uint64
	ruleEvents, routeEvents       atomic.Uint64
	addrEvents, ruleResubscribes  atomic.Uint64
	routeResubscribes             atomic.Uint64
	addrResubscribes              atomic.Uint64
}

// Stats are the Dataplane's counters since New.
type Stats struct {
	// Writes counts rtnetlink write operations (link, address, route and
	// rule changes), successful or not; WritesByOp splits them by kind.
	Writes     uint64            `json:"writes"`
	WritesByOp map[string]uint64 `json:"writesByOp"`
	// Reads counts rtnetlink reads (gets and dumps) made by the Dataplane
	// itself, not by its subscriptions.
	Reads   uint64 `json:"reads"`
	Applies uint64 `json:"applies"`
	// Restores counts writes made to repair the kernel after it diverged
	// from what was applied (someone deleted a rule, released a port...).
	Restores uint64 `json:"restores"`
	// Reconciles counts reconciler passes that read the kernel.
	Reconciles uint64 `json:"reconciles"`
	// LinkEvents counts link notifications; Resubscribes counts lost
	// subscriptions (all kinds) that were re-established with a full
	// re-sync; LinkResyncs counts link listings (one per (re)subscription).
	LinkEvents   uint64 `json:"linkEvents"`
	RouteEvents  uint64 `json:"routeEvents"`
	RuleEvents   uint64 `json:"ruleEvents"`
	AddrEvents   uint64 `json:"addrEvents"`
	Resubscribes uint64 `json:"resubscribes"`
	LinkResyncs  uint64 `json:"linkResyncs"`
	// Announcements counts the gratuitous ARPs and unsolicited NAs the
	// kernel was made to send: one per bridge address (of a family whose
	// notify sysctl is on) per announcement round.
	Announcements uint64 `json:"announcements"`
	// ConntrackDeleted counts conntrack entries deleted.
	ConntrackDeleted uint64 `json:"conntrackDeleted"`
	// NeighborsForgotten counts neighbour cache entries of nexthops that
	// moved to a new port, deleted so that the kernel resolves them again
	// (they are cache entries, not owned state, and not counted in Writes).
	NeighborsForgotten uint64 `json:"neighborsForgotten"`
	// NeighborsRestored counts the bridge's permanent neighbour entries set
	// back after an announcement round (the kernel flushes them when the
	// bridge's MAC is set).
	NeighborsRestored uint64 `json:"neighborsRestored"`
}

// Stats returns the Dataplane's counters.
func (dp *Dataplane) Stats() Stats {
	s := Stats{
		Writes:           dp.ctr.writes.Load(),
		WritesByOp:       map[string]uint64{},
		Reads:            dp.ctr.reads.Load(),
		Applies:          dp.ctr.applies.Load(),
		Restores:         dp.ctr.restores.Load(),
		Reconciles:       dp.ctr.reconciles.Load(),
		RouteEvents:      dp.ctr.routeEvents.Load(),
		RuleEvents:       dp.ctr.ruleEvents.Load(),
		AddrEvents:       dp.ctr.addrEvents.Load(),
		Announcements:    dp.ctr.announcements.Load(),
		ConntrackDeleted: dp.ctr.ctDeleted.Load(),

		NeighborsForgotten: dp.ctr.neighForgotten.Load(),
		NeighborsRestored:  dp.ctr.neighRestored.Load(),
	}
	if dp.linkTable != nil {
		s.LinkEvents = dp.linkTable.events.Load()
		s.LinkResyncs = dp.linkTable.resyncs.Load()
		s.Resubscribes = dp.linkTable.resubscribes.Load()
	}
	s.Resubscribes += dp.ctr.ruleResubscribes.Load() + dp.ctr.routeResubscribes.Load() + dp.ctr.addrResubscribes.Load()
	for i := range numOps {
		if n := dp.ctr.byOp[i].Load(); n > 0 {
			s.WritesByOp[op(i).String()] = n
		}
	}
	return s
}
