package kube

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

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
	u.SetAPIVersion(Group + "/" + Version)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetResourceVersion(rv)
	u.SetLabels(map[string]string{TrenchLabel: trenchName(trench)})
	return u, nil
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

// object is the IPAMBlock of b.
func (b *block) object(namespace, trench string) (*unstructured.Unstructured, error) {
	spec := blockSpec{
		Trench: trench, Family: familyName(b.family), Conduit: b.id.conduit, Node: b.id.node,
		Prefix: b.prefix.String(), Renewed: formatTime(b.renewed), AddressCount: len(b.children),
	}
	for name, l := range b.children {
		spec.Children = append(spec.Children, childEntry{Name: name, Address: l.prefix.String(), Renewed: formatTime(l.renewed)})
	}
	slices.SortFunc(spec.Children, func(a, b childEntry) int { return cmp.Compare(a.Name, b.Name) })
	return newObject(BlockKind, namespace, b.name, b.rv, trench, &spec)
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

// decodeBlock reads an IPAMBlock; it returns the spec's trench too.
func decodeBlock(u *unstructured.Unstructured) (*block, string, error) {
	var s blockSpec
	if err := specOf(u, &s); err != nil {
		return nil, "", err
	}
	bad := func(err error) (*block, string, error) {
		return nil, "", fmt.Errorf("IPAMBlock %s: %w", u.GetName(), err)
	}
	f, err := familyOf(s.Family)
	if err != nil {
		return bad(err)
	}
	b := &block{name: u.GetName(), rv: u.GetResourceVersion(), family: f, id: nodeID{s.Conduit, s.Node},
		children: make(map[string]lease, len(s.Children))}
	if b.prefix, err = netip.ParsePrefix(s.Prefix); err != nil {
		return bad(err)
	}
	if b.renewed, err = parseTime(s.Renewed); err != nil {
		return bad(err)
	}
	for _, c := range s.Children {
		var l lease
		if l.prefix, err = netip.ParsePrefix(c.Address); err != nil {
			return bad(fmt.Errorf("child %q: %w", c.Name, err))
		}
		if l.renewed, err = parseTime(c.Renewed); err != nil {
			return bad(fmt.Errorf("child %q: %w", c.Name, err))
		}
		b.children[c.Name] = l
	}
	return b, s.Trench, nil
}
