// Package configfile owns the configuration server's file: the YAML model
// of trenches, conduits and VIPs, its strict parsing and validation, and its
// watch (on internal/yamlfile), which delivers every new valid version of
// the file while keeping the last good one when an edit is broken. The
// proxy reads its static VIP file in the same format.
package configfile

import "net/netip"

// Config is the whole configuration configfile. The zero value is a valid, empty
// configuration.
type Config struct {
	Trenches []Trench  `yaml:"trenches"`
	Conduits []Conduit `yaml:"conduits"`
	VIPs     []VIP     `yaml:"vips"`
}

// Trench is a top-level network. Its name is unique in the configfile.
type Trench struct {
	Name string `yaml:"name"`
}

// Conduit is a secondary network of a trench. Its name is unique within its
// trench.
type Conduit struct {
	Name                string    `yaml:"name"`
	Trench              string    `yaml:"trench"`
	DestinationPortNats []PortNat `yaml:"destinationPortNats,omitempty"`
}

// PortNat maps a destination port of some VIPs of the conduit's trench to a
// port on the targets.
type PortNat struct {
	Port       uint32 `yaml:"port"`
	TargetPort uint32 `yaml:"targetPort"`
	// Protocol is tcp, udp or sctp (any case); it is passed on as written.
	Protocol string `yaml:"protocol"`
	// VIPs are names of VIPs of the conduit's trench.
	VIPs []string `yaml:"vips"`
}

// VIP is a virtual address served by a trench. Its name is unique within its
// trench; Address is a prefix in CIDR notation without host bits, such as
// 20.0.0.1/32 or 2001:db8::/64.
type VIP struct {
	Name    string `yaml:"name"`
	Address string `yaml:"address"`
	Trench  string `yaml:"trench"`
}

// Summary describes c in the watcher's "configuration loaded" log line.
func (c *Config) Summary() []any {
	return []any{"trenches", len(c.Trenches), "conduits", len(c.Conduits), "vips", len(c.VIPs)}
}

// VIPPrefixes returns the addresses of the VIPs of a trench, in file order. An
// empty trench selects the VIPs of every trench. It is meant for a validated
// Config, whose addresses all parse.
func (c *Config) VIPPrefixes(trench string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range c.VIPs {
		if trench != "" && v.Trench != trench {
			continue
		}
		if p, err := netip.ParsePrefix(v.Address); err == nil {
			out = append(out, p)
		}
	}
	return out
}
