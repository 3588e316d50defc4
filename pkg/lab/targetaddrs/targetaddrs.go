// Package targetaddrs owns how the load balancer stubs learn the target
// stubs' addresses: each target stub publishes the addresses it got from the
// proxy on a Board, and the load balancer stubs read it to keep their VIP
// routes in step with the targets that are up. The lab's Board is a
// directory of its run (Dir: one file per target); in a cluster it is the
// targets' pods on the Kubernetes API (Pods).
package targetaddrs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Board is where the target stubs publish their addresses and the load
// balancer stubs read them, by target name.
type Board interface {
	// Publish (re)places the addresses of the target name.
	Publish(ctx context.Context, name string, addrs []netip.Addr) error
	// Withdraw removes the publication of name; a missing one is no error.
	Withdraw(ctx context.Context, name string) error
	// Read returns every publication by target name.
	Read(ctx context.Context) (map[string][]netip.Addr, error)
}

// Dir is the Board of a directory (Publish, Withdraw, Read).
type Dir string

func (d Dir) Publish(_ context.Context, name string, addrs []netip.Addr) error {
	return Publish(string(d), name, addrs)
}

func (d Dir) Withdraw(_ context.Context, name string) error { return Withdraw(string(d), name) }

func (d Dir) Read(context.Context) (map[string][]netip.Addr, error) { return Read(string(d)) }

// tmpPrefix marks files being written; readers skip them.
const tmpPrefix = ".tmp-"

// Publish atomically (re)writes the publication of name: one address a line.
func Publish(dir, name string, addrs []netip.Addr) error {
	if name == "" || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("publish: invalid target name %q", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("publish %s: %w", name, err)
	}
	var b strings.Builder
	for _, a := range addrs {
		b.WriteString(a.String())
		b.WriteByte('\n')
	}
	tmp, err := os.CreateTemp(dir, tmpPrefix+name+"-")
	if err != nil {
		return fmt.Errorf("publish %s: %w", name, err)
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("publish %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("publish %s: %w", name, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("publish %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("publish %s: %w", name, err)
	}
	return nil
}

// Withdraw removes the publication of name; a missing one is not an error.
func Withdraw(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("withdraw %s: %w", name, err)
	}
	return nil
}

// Read returns every publication in dir by target name. A missing directory
// reads as empty; lines that are not addresses are skipped.
func Read(dir string) (map[string][]netip.Addr, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string][]netip.Addr{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read publications: %w", err)
	}
	out := make(map[string][]netip.Addr, len(entries))
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // withdrawn meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read publication %s: %w", e.Name(), err)
		}
		var addrs []netip.Addr
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if a, err := netip.ParseAddr(strings.TrimSpace(sc.Text())); err == nil {
				addrs = append(addrs, a)
			}
		}
		_ = f.Close()
		out[e.Name()] = addrs
	}
	return out, nil
}

// Addrs flattens publications into a sorted, de-duplicated address list.
func Addrs(pubs map[string][]netip.Addr) []netip.Addr {
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	for _, as := range pubs {
		for _, a := range as {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}
