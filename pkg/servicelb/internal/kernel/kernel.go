// Package kernel holds what both service load balancer providers do to the
// kernel of their namespace (code runs there through internal/netnsdo):
// reach its nftables, build the nftables expressions they share, remove
// their table, and flush the conntrack entries of removed UDP services and
// endpoints.
package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/internal/nftconn"
)

// NFT returns an nftables connection to ns.
func NFT(ns netns.NsHandle) (*nftables.Conn, error) { return nftconn.Open(ns) }

// Table is the inet table named name.
func Table(name string) *nftables.Table {
	return &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
}

// TableExists reports whether ns has our inet table name.
func TableExists(ns netns.NsHandle, name string) (bool, error) {
	return nftconn.TableExists(ns, nftables.TableFamilyINet, name)
}

// DeleteTable removes the inet table name from ns; a missing table is no
// error.
func DeleteTable(ns netns.NsHandle, name string) error {
	ok, err := TableExists(ns, name)
	if err != nil || !ok {
		return err
	}
	c, err := NFT(ns)
	if err != nil {
		return err
	}
	c.DelTable(Table(name))
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete nftables table %s: %w", name, err)
	}
	return nil
}

// SetSysctl makes the dotted key in ns hold value, writing it only when it
// holds another.
func SetSysctl(ns netns.NsHandle, key, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return netnsdo.Do(ns, func() error {
		// A key that already holds the value is not written: in a pod
		// /proc/sys is read-only, and an init container sets the keys.
		if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == value {
			return nil
		}
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("sysctl %s: %w (is the module loaded?)", key, err)
			}
			return fmt.Errorf("sysctl %s: %w", key, err)
		}
		return nil
	})
}
