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
// per-flow (L4) multipath hashing and no reverse-path filtering.
var RouterSysctls = map[string]string{
	"net.ipv4.ip_forward":                "1",
	"net.ipv6.conf.all.forwarding":       "1",
	"net.ipv4.fib_multipath_hash_policy": "1",
	"net.ipv6.fib_multipath_hash_policy": "1",
	"net.ipv4.conf.all.rp_filter":        "0",
	"net.ipv4.conf.default.rp_filter":    "0",
}

// ApplySysctls writes every key of values in the namespace at path.
func ApplySysctls(path string, values map[string]string) error {
	for k, v := range values {
		if err := Sysctl(path, k, v); err != nil {
			return err
		}
	}
	return nil
}
