package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func (dp *Dataplane) ruleObject(p netip.Prefix) string {
	return fmt.Sprintf("from %s lookup %d proto %d", p, dp.table, dp.proto)
}

func (dp *Dataplane) rule(p netip.Prefix) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = familyOf(p.Addr()).af()
	r.Src = prefixToIPNet(p)
	r.Table = dp.table
	r.Protocol = uint8(dp.proto)
	if dp.opts.RulePriority > 0 {
		r.Priority = dp.opts.RulePriority
	}
	return r
}

// applyRulesLocked adds the missing VIP rules and deletes the unwanted ones.
func (dp *Dataplane) applyRulesLocked(target []netip.Prefix) error {
	var errs []error
	add, del := dp.m.rules.diff(target)
	added := add[:0]
	for _, p := range add {
		r := dp.rule(p)
		err := dp.write(opRuleAdd, dp.ruleObject(p), func() error { return dp.h.RuleAdd(r) })
		if err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, err)
			continue
		}
		added = append(added, p)
	}
	dp.m.rules.merge(added, make([]struct{}, len(added)))
	deleted := del[:0]
	for _, p := range del {
		r := dp.rule(p)
		r.Priority = -1 // match ours whatever priority the kernel gave it
		err := dp.write(opRuleDel, dp.ruleObject(p), func() error { return dp.h.RuleDel(r) })
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, p)
		dp.flush.add(dp.opts.DisableConntrackFlush, p)
	}
	dp.m.rules.removeAll(deleted)
	return errors.Join(errs...)
}

// loadRulesLocked reads our rules (our protocol, our table) into the model;
// duplicates and rules that are not `from <prefix>` are deleted.
func (dp *Dataplane) loadRulesLocked() error {
	dp.read()
	rules, err := dp.h.RuleListFiltered(netlink.FAMILY_ALL, &netlink.Rule{Table: dp.table}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return fmt.Errorf("list rules of table %d: %w", dp.table, err)
	}
	set := map[netip.Prefix]struct{}{}
	var keys []netip.Prefix
	var errs []error
	for _, r := range rules {
		if int(r.Protocol) != dp.proto || r.Table != dp.table {
			continue
		}
		p, plain := plainSource(&r)
		if _, dup := set[p]; plain && !dup {
			set[p] = struct{}{}
			keys = append(keys, p)
			continue
		}
		del := r
		del.Protocol = uint8(dp.proto)
		err := dp.write(opRuleDel, fmt.Sprintf("priority %d %s (stray)", r.Priority, r.String()), func() error { return dp.h.RuleDel(&del) })
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
	}
	slices.SortFunc(keys, netip.Prefix.Compare)
	dp.m.rules = newRules()
	dp.m.rules.merge(keys, make([]struct{}, len(keys)))
	return errors.Join(errs...)
}

// ruleEvent is a parsed RTM_NEWRULE / RTM_DELRULE notification.
type ruleEvent struct {
	del      bool
	family   int
	src      netip.Prefix // invalid when the rule has no source
	table    int
	protocol int
	priority int
}

// parseRuleMsg parses a fib_rule_hdr and its attributes.
func parseRuleMsg(typ uint16, b []byte) (ruleEvent, error) {
	const hdrLen = 12 // struct fib_rule_hdr
	if len(b) < hdrLen {
		return ruleEvent{}, fmt.Errorf("rule message too short (%d bytes)", len(b))
	}
	ev := ruleEvent{del: typ == unix.RTM_DELRULE, family: int(b[0]), table: int(b[4])}
	srcLen := int(b[2])
	attrs, err := nl.ParseRouteAttr(b[hdrLen:])
	if err != nil {
		return ruleEvent{}, err
	}
	for _, a := range attrs {
		switch a.Attr.Type {
		case nl.FRA_SRC:
			if ip, ok := netip.AddrFromSlice(a.Value); ok {
				ev.src = netip.PrefixFrom(ip.Unmap(), srcLen)
			}
		case nl.FRA_TABLE:
			if len(a.Value) >= 4 {
				ev.table = int(binary.NativeEndian.Uint32(a.Value))
			}
		case nl.FRA_PROTOCOL:
			if len(a.Value) >= 1 {
				ev.protocol = int(a.Value[0])
			}
		case nl.FRA_PRIORITY:
			if len(a.Value) >= 4 {
				ev.priority = int(binary.NativeEndian.Uint32(a.Value))
			}
		}
	}
	return ev, nil
}

// subscribeRules subscribes to the IPv4 and IPv6 rule notification groups in
// ns (vishvananda/netlink has no rule subscription). It has the semantics of
// the library's own subscriptions: ch is closed when the socket fails or
// done is closed.
func subscribeRules(ns netns.NsHandle, rcvbuf int, ch chan<- ruleEvent, done <-chan struct{}, cb func(error)) error {
	s, err := nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_IPV4_RULE, unix.RTNLGRP_IPV6_RULE)
	if err != nil {
		return err
	}
	if rcvbuf > 0 {
		if err := s.SetReceiveBufferSize(rcvbuf, true); err != nil {
			_ = s.SetReceiveBufferSize(rcvbuf, false)
		}
	}
	go func() {
		<-done
		s.Close()
	}()
	go func() {
		defer close(ch)
		for {
			msgs, from, err := s.Receive()
			if err != nil {
				cb(fmt.Errorf("receive: %w", err))
				return
			}
			if from.Pid != nl.PidKernel {
				continue
			}
			for _, m := range msgs {
				if m.Header.Type != unix.RTM_NEWRULE && m.Header.Type != unix.RTM_DELRULE {
					continue
				}
				ev, err := parseRuleMsg(m.Header.Type, m.Data)
				if err != nil {
					cb(err)
					continue
				}
				ch <- ev
			}
		}
	}()
	return nil
}

// ruleEventMatchesLocked tells whether a rule notification agrees with the
// model (so it needs no read).
func (dp *Dataplane) ruleEventMatchesLocked(ev ruleEvent) bool {
	if ev.table != dp.table || ev.protocol != dp.proto {
		return true
	}
	if !ev.src.IsValid() {
		return ev.del // a rule of ours without a source: a stray
	}
	have := dp.m.rules.has(ev.src)
	if ev.del {
		return !have
	}
	return have
}
