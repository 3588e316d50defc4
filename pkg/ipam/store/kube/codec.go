package kube

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kinds of the resources.
const (
	PoolKind  = "IPAMPool"
	BlockKind = "IPAMBlock"
)

func newObject(kind, namespace, name, rv, trench string, spec any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", kind, name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": m}}
	setMeta(u, kind, namespace, name, rv, trench)
	return u, nil
}

// setMeta fills in an object's kind, name, version and trench label.
func setMeta(u *unstructured.Unstructured, kind, namespace, name, rv, trench string) {
	u.SetAPIVersion(Group + "/" + Version)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetResourceVersion(rv)
	u.SetLabels(map[string]string{TrenchLabel: trenchName(trench)})
}

// object is the IPAMPool of p.
func (p *pool) object(namespace, trench string) (*unstructured.Unstructured, error) {
	spec := poolSpec{
		Trench: trench, Family: familyName(p.family), Prefix: p.prefix.String(),
		ConduitLength: int(p.condLen), NodeLength: int(p.nodeLen),
		Heartbeat: formatTime(p.heartbeat), ServedBy: p.servedBy,
		ConduitCount: len(p.conduits), NodeCount: len(p.nodes),
	}
	for name, pfx := range p.conduits {
		spec.Conduits = append(spec.Conduits, conduitEntry{Name: name, Prefix: pfx.String()})
	}
	slices.SortFunc(spec.Conduits, func(a, b conduitEntry) int { return cmp.Compare(a.Name, b.Name) })
	for id, pfx := range p.nodes {
		spec.Nodes = append(spec.Nodes, nodeEntry{Conduit: id.conduit, Name: id.node, Prefix: pfx.String()})
	}
	slices.SortFunc(spec.Nodes, func(a, b nodeEntry) int {
		return cmp.Or(cmp.Compare(a.Conduit, b.Conduit), cmp.Compare(a.Name, b.Name))
	})
	return newObject(PoolKind, namespace, p.name, p.rv, trench, &spec)
}

// object is the IPAMBlock of b. Each child is one string in a map keyed by
// its name: two thirds of the bytes of an object with three fields or
// less, and one value for the API server to check instead of three (a full
// /24 is rewritten whole on every change to it).
func (b *block) object(namespace, trench string) *unstructured.Unstructured {
	spec := map[string]any{
		"trench": trench, "family": familyName(b.family), "conduit": b.id.conduit, "node": b.id.node,
		"prefix": b.prefix.String(), "addressCount": int64(len(b.children)),
	}
	if r := formatTime(b.renewed); r != "" {
		spec["renewed"] = r
	}
	if len(b.children) > 0 {
		leases := make(map[string]any, len(b.children))
		for name, l := range b.children {
			leases[name] = formatLease(l)
		}
		spec["leases"] = leases
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	setMeta(u, BlockKind, namespace, b.name, b.rv, trench)
	return u
}

func specOf(u *unstructured.Unstructured, into any) error {
	m, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s has no spec", u.GetKind(), u.GetName())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, into); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// decodePool reads an IPAMPool; it returns the spec's trench too.
func decodePool(u *unstructured.Unstructured) (*pool, string, error) {
	var s poolSpec
	if err := specOf(u, &s); err != nil {
		return nil, "", err
	}
	bad := func(err error) (*pool, string, error) {
		return nil, "", fmt.Errorf("IPAMPool %s: %w", u.GetName(), err)
	}
	f, err := familyOf(s.Family)
	if err != nil {
		return bad(err)
	}
	p := &pool{name: u.GetName(), rv: u.GetResourceVersion(), family: f, servedBy: s.ServedBy,
		condLen: uint8(s.ConduitLength), nodeLen: uint8(s.NodeLength),
		conduits: make(map[string]netip.Prefix, len(s.Conduits)), nodes: make(map[nodeID]netip.Prefix, len(s.Nodes))}
	if p.prefix, err = netip.ParsePrefix(s.Prefix); err != nil {
		return bad(err)
	}
	if p.heartbeat, err = parseTime(s.Heartbeat); err != nil {
		return bad(err)
	}
	for _, c := range s.Conduits {
		if p.conduits[c.Name], err = netip.ParsePrefix(c.Prefix); err != nil {
			return bad(fmt.Errorf("conduit %q: %w", c.Name, err))
		}
	}
	for _, n := range s.Nodes {
		if p.nodes[nodeID{n.Conduit, n.Name}], err = netip.ParsePrefix(n.Prefix); err != nil {
			return bad(fmt.Errorf("node %q of conduit %q: %w", n.Name, n.Conduit, err))
		}
	}
	return p, s.Trench, nil
}

// decodeBlock reads an IPAMBlock (with a leases map, or the list of
// children of earlier versions); it returns the spec's trench too.
func decodeBlock(u *unstructured.Unstructured) (*block, string, error) {
	spec, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("%s %s has no spec", u.GetKind(), u.GetName())
	}
	bad := func(err error) (*block, string, error) {
		return nil, "", fmt.Errorf("IPAMBlock %s: %w", u.GetName(), err)
	}
	str := func(key string) string {
		v, _ := spec[key].(string)
		return v
	}
	f, err := familyOf(str("family"))
	if err != nil {
		return bad(err)
	}
	leases, _ := spec["leases"].(map[string]any)
	listed, _ := spec["children"].([]any)
	b := &block{name: u.GetName(), rv: u.GetResourceVersion(), family: f, id: nodeID{str("conduit"), str("node")},
		children: make(map[string]lease, len(leases)+len(listed))}
	if b.prefix, err = netip.ParsePrefix(str("prefix")); err != nil {
		return bad(err)
	}
	if b.renewed, err = parseTime(str("renewed")); err != nil {
		return bad(err)
	}
	for name, v := range leases {
		text, _ := v.(string)
		if b.children[name], err = parseLease(text); err != nil {
			return bad(fmt.Errorf("child %q: %w", name, err))
		}
	}
	if err := decodeListed(listed, b.children); err != nil {
		return bad(err)
	}
	return b, str("trench"), nil
}

// decodeListed reads the children of a block written by an earlier
// version: a list of {name, address, renewed}.
func decodeListed(listed []any, into map[string]lease) error {
	for _, c := range listed {
		m, _ := c.(map[string]any)
		name, _ := m["name"].(string)
		address, _ := m["address"].(string)
		renewed, _ := m["renewed"].(string)
		var l lease
		var err error
		if l.prefix, err = netip.ParsePrefix(address); err != nil {
			return fmt.Errorf("child %q: %w", name, err)
		}
		if l.renewed, err = parseTime(renewed); err != nil {
			return fmt.Errorf("child %q: %w", name, err)
		}
		into[name] = l
	}
	return nil
}

// formatLease is a child's entry in its block: its address (the prefix
// when it is not a single address) and, if it was ever renewed, the time,
// e.g. "172.16.0.5 2026-12-06T06:00:41.123456789Z".
func formatLease(l lease) string {
	a := l.prefix.String()
	if l.prefix.IsSingleIP() {
		a = l.prefix.Addr().String()
	}
	if l.renewed.IsZero() {
		return a
	}
	return a + " " + formatTime(l.renewed)
}

// parseLease reads what formatLease wrote.
func parseLease(s string) (lease, error) {
	a, renewed, _ := strings.Cut(s, " ")
	var l lease
	var err error
	if strings.Contains(a, "/") {
		l.prefix, err = netip.ParsePrefix(a)
	} else {
		var addr netip.Addr
		if addr, err = netip.ParseAddr(a); err == nil {
			l.prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
	}
	if err != nil {
		return lease{}, fmt.Errorf("lease %q: %w", s, err)
	}
	if l.renewed, err = parseTime(renewed); err != nil {
		return lease{}, fmt.Errorf("lease %q: %w", s, err)
	}
	return l, nil
}
