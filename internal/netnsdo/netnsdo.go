// Package netnsdo is the project's one way to run code inside another
// network namespace: the callback runs on a locked OS thread switched into
// the namespace, and the thread is switched back afterwards. A thread that
// cannot be switched back is never handed back to the Go scheduler: it stays
// locked, so the runtime destroys it when its goroutine ends instead of
// running other goroutines in the wrong namespace. It also opens netlink
// handles in a namespace given by path, which needs no thread switch.
package netnsdo

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Current reports whether ns stands for the caller's own namespace: a closed
// handle (netns.None()) or the zero value. Do runs fn there with no switch,
// which needs no CAP_SYS_ADMIN.
func Current(ns netns.NsHandle) bool { return ns <= 0 }

// Do runs fn on the calling goroutine's OS thread, locked and switched into
// ns, and switches the thread back when fn returns. It returns fn's error,
// joined with the error of switching back if that failed; in that case the
// thread is left locked so that it ends with the goroutine.
//
// Sockets and files fn opens stay bound to ns and may be used from any
// goroutine afterwards; goroutines fn starts do not run in ns.
func Do(ns netns.NsHandle, fn func() error) error {
	if Current(ns) {
		return fn()
	}
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
		// No UnlockOSThread: the thread dies with this goroutine.
		return errors.Join(ferr, fmt.Errorf("return to original netns: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// DoPath is Do for the namespace bound at path (a /var/run/netns/<name>
// file or a /proc/<pid>/ns/net link). An empty path is the caller's
// namespace. fn's error is returned as it is.
func DoPath(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer ns.Close()
	return Do(ns, fn)
}
