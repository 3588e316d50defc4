package topo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// NetNSDir is where iproute2 bind-mounts named namespaces.
const NetNSDir = "/var/run/netns"

// NetNSPath is the bind-mount path of the named namespace.
func NetNSPath(name string) string { return filepath.Join(NetNSDir, name) }

// Sysctl writes value to the sysctl key (dotted, e.g.
// "net.ipv4.ip_forward") in the namespace at path (current when empty).
func Sysctl(path, key, value string) error {
	file := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return netnsdo.DoPath(path, func() error {
		if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
		}
		return nil
	})
}

// RouterSysctls are the sysctls of a namespace that forwards traffic with
// per-flow multipath hashing, no reverse-path filtering and no IPv6
// duplicate address detection.
//
// The hash is of the packet's 5-tuple (policy 3, the custom fields:
// addresses, protocol and ports), not the L4 policy 1: policy 1 takes the
// hash a packet already carries, and a packet from a local socket carries
// its socket's hash across a veth into the next namespace. TCP draws a new
// one at every retransmission timeout (net.core.txrehash), so behind
// policy 1 a connection whose segment timed out once moved to another
// target, which reset it. A router on a wire sees only the packet; this
// makes the lab's routers hash as it would.
//
// DAD is off for the links made later too (default): the addresses the
// lab gives are added without it, but the kernel's own link-local address
// of a new link (an NSM connection's veth after an LB or a target
// restarts) would stay tentative for a second or more, and a namespace without a usable link-local address cannot send
// neighbour solicitations: the IPv6 flows of a restarted LB were lost
// until it had one.
var RouterSysctls = map[string]string{
	"net.ipv4.ip_forward":                "1",
	"net.ipv6.conf.all.forwarding":       "1",
	"net.ipv4.fib_multipath_hash_policy": "3",
	"net.ipv6.fib_multipath_hash_policy": "3",
	"net.ipv4.fib_multipath_hash_fields": FiveTuple,
	"net.ipv6.fib_multipath_hash_fields": FiveTuple,
	"net.ipv4.conf.all.rp_filter":        "0",
	"net.ipv4.conf.default.rp_filter":    "0",
	"net.ipv6.conf.all.accept_dad":       "0",
	"net.ipv6.conf.default.accept_dad":   "0",
}

// FiveTuple is the multipath hash's fields (fib_multipath_hash_fields):
// source and destination address, protocol, source and destination port.
const FiveTuple = "0x0037"

// ApplySysctls writes every key of values in the namespace at path.
func ApplySysctls(path string, values map[string]string) error {
	for k, v := range values {
		if err := Sysctl(path, k, v); err != nil {
			return err
		}
	}
	return nil
}
