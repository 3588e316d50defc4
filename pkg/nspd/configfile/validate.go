package configfile

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/causeway-net/causeway/internal/yamlfile"
)

var protocols = map[string]bool{"tcp": true, "udp": true, "sctp": true}

// validate checks c as Config.Validate documents, naming each entry with l.
func validate(c *Config, l yamlfile.Lines) error {
	v := &validator{
		lines:    l,
		trenches: map[string]int{},
		vipNames: map[nameKey]int{},
		vipAddrs: map[string]int{},
		conduits: map[nameKey]int{},
	}
	v.trenchNames(c.Trenches)
	v.vips(c.VIPs)
	v.conduitList(c.Conduits)
	if len(v.errs) == 0 {
		return nil
	}
	return &yamlfile.InvalidError{Problems: v.errs}
}

// nameKey identifies a named entry within its trench.
type nameKey struct{ trench, name string }

// validator collects the problems of one Config and the names seen so far.
type validator struct {
	lines    yamlfile.Lines
	errs     []error
	trenches map[string]int  // trench name -> index
	vipNames map[nameKey]int // VIP name in its trench -> index
	vipAddrs map[string]int  // trench and VIP prefix -> index
	conduits map[nameKey]int // conduit name in its trench -> index
}

// bad records a problem of the entry named where.
func (v *validator) bad(where, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
}

// trenchNames checks that trench names are set and unique, and records them.
func (v *validator) trenchNames(trenches []Trench) {
	for i, t := range trenches {
		w := v.lines.Where("trenches", i, t.Name)
		switch first, dup := v.trenches[t.Name]; {
		case t.Name == "":
			v.bad(w, "name is empty")
		case dup:
			v.bad(w, "name is already used by trenches[%d]", first)
		default:
			v.trenches[t.Name] = i
		}
	}
}

// checkTrench reports whether trench is set and defined under trenches.
func (v *validator) checkTrench(w, trench string) bool {
	if trench == "" {
		v.bad(w, "trench is empty")
		return false
	}
	if _, ok := v.trenches[trench]; !ok {
		v.bad(w, "trench %q is not defined under trenches", trench)
		return false
	}
	return true
}

// claim records entry i as the holder of its name in its trench.
func (v *validator) claim(seen map[nameKey]int, kind, w, trench, name string, i int, okTrench bool) {
	k := nameKey{trench, name}
	if first, dup := seen[k]; name == "" {
		v.bad(w, "name is empty")
	} else if dup {
		v.bad(w, "name is already used by %s[%d] in trench %q", kind, first, trench)
	} else if okTrench {
		seen[k] = i
	}
}

// vips checks the names, trenches and addresses of the VIPs.
func (v *validator) vips(vips []VIP) {
	for i, vip := range vips {
		w := v.lines.Where("vips", i, vip.Name)
		v.claim(v.vipNames, "vips", w, vip.Trench, vip.Name, i, v.checkTrench(w, vip.Trench))
		v.vipAddress(w, vip, i)
	}
}

// vipAddress checks that VIP i has a prefix without host bits that is unique
// in its trench, and records it.
func (v *validator) vipAddress(w string, vip VIP, i int) {
	p, err := netip.ParsePrefix(vip.Address)
	switch {
	case vip.Address == "":
		v.bad(w, "address is empty")
	case err != nil:
		hint := ""
		if _, aerr := netip.ParseAddr(vip.Address); aerr == nil {
			hint = " (add /32 or /128 for a single address)"
		}
		v.bad(w, "address %q is not a prefix in CIDR notation%s", vip.Address, hint)
	case p.Masked() != p:
		v.bad(w, "address %q has host bits set; did you mean %s?", vip.Address, p.Masked())
	default:
		k := vip.Trench + "\x00" + p.String()
		if first, dup := v.vipAddrs[k]; dup {
			v.bad(w, "address %s is already used by vips[%d] in trench %q", p, first, vip.Trench)
		} else {
			v.vipAddrs[k] = i
		}
	}
}

// conduitList checks the names, trenches and port NATs of the conduits.
func (v *validator) conduitList(conduits []Conduit) {
	for i, cd := range conduits {
		w := v.lines.Where("conduits", i, cd.Name)
		okTrench := v.checkTrench(w, cd.Trench)
		v.claim(v.conduits, "conduits", w, cd.Trench, cd.Name, i, okTrench)
		for j, pn := range cd.DestinationPortNats {
			pw := fmt.Sprintf("%s destinationPortNats[%d]", w, j)
			v.portNat(pw, pn, cd.Trench, okTrench)
		}
	}
}

// portNat checks the ports, protocol and VIP references of one port NAT of a
// conduit of trench; VIP references are checked only when okTrench.
func (v *validator) portNat(pw string, pn PortNat, trench string, okTrench bool) {
	if pn.Port == 0 || pn.Port > 65535 {
		v.bad(pw, "port %d is not in 1-65535", pn.Port)
	}
	if pn.TargetPort == 0 || pn.TargetPort > 65535 {
		v.bad(pw, "targetPort %d is not in 1-65535", pn.TargetPort)
	}
	if !protocols[strings.ToLower(pn.Protocol)] {
		v.bad(pw, "protocol %q is not one of tcp, udp, sctp", pn.Protocol)
	}
	if len(pn.VIPs) == 0 {
		v.bad(pw, "vips is empty")
	}
	for _, name := range pn.VIPs {
		if _, ok := v.vipNames[nameKey{trench, name}]; !ok && okTrench {
			v.bad(pw, "vip %q is not defined in trench %q", name, trench)
		}
	}
}
