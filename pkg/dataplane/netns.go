package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// callerNamespace returns a handle of the calling thread's network namespace,
// or netns.None() when that is the process's own namespace. With None, no
// operation switches namespaces (the netlink library and netnsdo.Do skip
// setns for a closed handle): setns takes CAP_SYS_ADMIN, which a non-root proxy
// with only its file capabilities does not have, even to enter the namespace
// it is in.
func callerNamespace() (netns.NsHandle, error) {
	cur, err := netns.Get()
	if err != nil {
		return netns.None(), fmt.Errorf("get current netns: %w", err)
	}
	proc, err := netns.GetFromPath("/proc/self/ns/net")
	if err != nil {
		return cur, nil // cannot tell: keep switching, as before
	}
	defer proc.Close()
	if cur.Equal(proc) {
		_ = cur.Close()
		return netns.None(), nil
	}
	return cur, nil
}

// sysctl is one setting the Dataplane enforces.
type sysctl struct {
	key   string // dotted, as sysctl(8) names it
	value string
}

func (s sysctl) path() string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(s.key, ".", "/"))
}

// globalSysctls are the namespace-wide settings; bridgeSysctls the ones of
// the bridge interface (set once it exists).
func globalSysctls() []sysctl {
	return []sysctl{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv4.conf.all.forwarding", "1"},
		{"net.ipv6.conf.all.forwarding", "1"},
		{"net.ipv4.fib_multipath_hash_policy", "1"},
		{"net.ipv6.fib_multipath_hash_policy", "1"},
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net.ipv4.conf.default.rp_filter", "0"},
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.default.accept_dad", "0"},
	}
}

// bridgeNetfilterSysctls hand bridged frames to netfilter (see
// Options.BridgeNetfilter); the keys exist once br_netfilter is loaded.
func bridgeNetfilterSysctls() []sysctl {
	return []sysctl{
		{"net.bridge.bridge-nf-call-iptables", "1"},
		{"net.bridge.bridge-nf-call-ip6tables", "1"},
	}
}

// echoSocketSysctls open ICMP echo sockets to every group of the namespace
// (see Options.EchoSockets). Only the proxy's pod shares the namespace.
func echoSocketSysctls() []sysctl {
	return []sysctl{{"net.ipv4.ping_group_range", "0 2147483647"}}
}

func bridgeSysctls(name string) []sysctl {
	// Interface names may contain dots; setSysctls builds these paths with
	// ifacePath rather than by replacing every dot.
	return []sysctl{
		{"net.ipv4.conf." + name + ".rp_filter", "0"},
		{"net.ipv6.conf." + name + ".accept_dad", "0"},
		// With promote_secondaries, replacing the bridge address in the
		// same subnet (add the new one, then delete the old one) does not
		// take the new, secondary address away with the old primary.
		{"net.ipv4.conf." + name + ".promote_secondaries", "1"},
	}
}

// SysctlError reports a sysctl that could not be read or set.
type SysctlError struct {
	Key   string
	Value string
	Err   error
}

func (e *SysctlError) Error() string {
	return fmt.Sprintf("sysctl %s=%s: %v", e.Key, e.Value, e.Err)
}

func (e *SysctlError) Unwrap() error { return e.Err }

// setSysctls sets each sysctl in ns, writing only those whose current value
// differs (so a read-only /proc/sys that already holds the right values, as
// in a pod whose init container did the job, is fine). It returns one
// *SysctlError per failure, joined.
func setSysctls(ns netns.NsHandle, iface string, list []sysctl) (written int, err error) {
	var errs []error
	derr := netnsdo.Do(ns, func() error {
		for _, s := range list {
			p := s.path()
			if iface != "" {
				// Keys of an interface: the name may contain dots.
				p = ifacePath(s.key, iface)
			}
			cur, rerr := os.ReadFile(p)
			// By fields: the kernel prints a pair with a tab.
			if rerr == nil && strings.Join(strings.Fields(string(cur)), " ") == s.value {
				continue
			}
			if werr := os.WriteFile(p, []byte(s.value+"\n"), 0o644); werr != nil {
				if rerr != nil {
					werr = rerr
				}
				errs = append(errs, &SysctlError{Key: s.key, Value: s.value, Err: werr})
				continue
			}
			written++
		}
		return nil
	})
	if derr != nil {
		errs = append(errs, derr)
	}
	return written, errors.Join(errs...)
}

// ifacePath builds the /proc/sys path of an interface sysctl whose key is
// "net.<proto>.conf.<iface>.<name>".
func ifacePath(key, iface string) string {
	rest := strings.TrimPrefix(key, "net.")
	proto, rest, _ := strings.Cut(rest, ".")
	rest = strings.TrimPrefix(rest, "conf."+iface+".")
	return filepath.Join("/proc/sys/net", proto, "conf", iface, rest)
}

// readSysctls returns the current values of list in ns (for Snapshot).
func readSysctls(ns netns.NsHandle, iface string, list []sysctl, into map[string]string) {
	_ = netnsdo.Do(ns, func() error {
		for _, s := range list {
			p := s.path()
			if iface != "" {
				p = ifacePath(s.key, iface)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				into[s.key] = "error: " + err.Error()
				continue
			}
			into[s.key] = strings.Join(strings.Fields(string(b)), " ")
		}
		return nil
	})
}

// SysctlFamilies is a set of IP families whose sysctls the Dataplane
// manages; zero means both.
type SysctlFamilies uint8

const (
	SysctlsIPv4 SysctlFamilies = 1 << iota
	SysctlsIPv6
)

// filter keeps the sysctls of the families of f (all for zero).
func (f SysctlFamilies) filter(list []sysctl) []sysctl {
	if f == 0 {
		return list
	}
	var out []sysctl
	for _, s := range list {
		v6 := strings.HasPrefix(s.key, "net.ipv6.")
		if (v6 && f&SysctlsIPv6 != 0) || (!v6 && f&SysctlsIPv4 != 0) {
			out = append(out, s)
		}
	}
	return out
}

// PodSysctls returns, as "key=value", what the Dataplane checks in its
// namespace for families (see Options.SysctlFamilies), with the bridge's own
// keys given as their "default" ones, which a bridge created later inherits.
// A proxy that may not write /proc/sys (a non-root pod) needs a privileged
// init container to set exactly these: New only writes a sysctl whose value
// differs.
func PodSysctls(families SysctlFamilies) []string {
	var out []string
	for _, s := range families.filter(append(globalSysctls(), ownBridgeSysctls("default")...)) {
		kv := s.key + "=" + s.value
		if !slices.Contains(out, kv) {
			out = append(out, kv)
		}
	}
	return out
}
