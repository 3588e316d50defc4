package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// NetNS is a throw-away named network namespace owned by one test.
type NetNS struct {
	Name   string
	Handle netns.NsHandle
}

// Path is the namespace's bind-mount path, usable as a file:// netns URL.
func (n *NetNS) Path() string { return "/var/run/netns/" + n.Name }

// Do runs fn on an OS thread switched into the namespace, and switches back
// (see netnsdo.Do).
func (n *NetNS) Do(fn func() error) error { return netnsdo.Do(n.Handle, fn) }

// Exec runs a command inside the namespace (`ip netns exec`) and returns its
// combined output.
func (n *NetNS) Exec(args ...string) (string, error) {
	full := append([]string{"netns", "exec", n.Name}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip netns exec %s %s: %w: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// LinkIndex is the index of the link called name; the test fails when there
// is none.
func (n *NetNS) LinkIndex(t testing.TB, name string) int {
	t.Helper()
	h, err := netlink.NewHandleAt(n.Handle)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", n.Name, err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s in %s: %v", name, n.Name, err)
	}
	return l.Attrs().Index
}

// Links are the namespace's links; the test fails when they cannot be listed.
func (n *NetNS) Links(t testing.TB) []netlink.Link {
	t.Helper()
	h, err := netlink.NewHandleAt(n.Handle)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", n.Name, err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatalf("links in %s: %v", n.Name, err)
	}
	return links
}

// MustExec is Exec that fails the test on error.
func (n *NetNS) MustExec(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// NewNetNS creates a named namespace with loopback up and registers its
// removal with t.Cleanup, so it goes away even when the test fails. It
// requires root (see RequireRoot).
func NewNetNS(t testing.TB, prefix string) *NetNS {
	t.Helper()
	RequireRoot(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("cw-%s-%s", prefix, hex.EncodeToString(b))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", name).Run()
	})
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	ns := &NetNS{Name: name, Handle: h}
	t.Cleanup(ns.closeHandle)
	ns.MustExec(t, "ip", "link", "set", "lo", "up")
	return ns
}

// Remove deletes the namespace now, as the end of a pod does: its mount
// goes and the test's handle is closed, so that only what others hold
// keeps it alive. The namespace's methods must not be used after it.
func (n *NetNS) Remove(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v: %s", n.Name, err, out)
	}
	n.closeHandle()
}

// closeHandle closes the test's handle once.
func (n *NetNS) closeHandle() {
	if n.Handle.IsOpen() {
		_ = n.Handle.Close()
	}
}
