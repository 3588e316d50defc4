package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// doInNS runs fn on an OS thread switched into ns, and switches back. The
// thread stays locked while fn runs, so fn must not start goroutines that
// expect to inherit the namespace. Sockets and files opened by fn stay bound
// to ns afterwards and may be used from any goroutine. If the thread cannot
// be switched back it is left locked, so that the runtime retires it when
// the goroutine ends instead of reusing it in the wrong namespace.
func doInNS(ns netns.NsHandle, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns: %w", err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: it dies with this goroutine.
		return errors.Join(ferr, fmt.Errorf("return to original netns: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// DoInNS runs fn on an OS thread switched into ns and switches back (see
// doInNS); other packages that open sockets in a namespace share it.
func DoInNS(ns netns.NsHandle, fn func() error) error { return doInNS(ns, fn) }

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
	derr := doInNS(ns, func() error {
		for _, s := range list {
			p := s.path()
			if iface != "" {
				// Keys of an interface: the name may contain dots.
				p = ifacePath(s.key, iface)
			}
			cur, rerr := os.ReadFile(p)
			if rerr == nil && strings.TrimSpace(string(cur)) == s.value {
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
	_ = doInNS(ns, func() error {
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
			into[s.key] = strings.TrimSpace(string(b))
		}
		return nil
	})
}
