// Package nftconn opens nftables connections into a network namespace and
// answers the one question every owner of a table asks first: is it there.
package nftconn

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// Open opens an nftables connection whose netlink socket lives in ns (the
// caller's own namespace when ns is the current one); no thread switches
// namespace. Every transaction on it is atomic: the kernel applies all of
// a Flush or nothing.
func Open(ns netns.NsHandle) (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if !netnsdo.Current(ns) {
		opts = append(opts, nftables.WithNetNSFd(int(ns)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables connection: %w", err)
	}
	return c, nil
}

// TableExists reports whether ns has the table name of family.
func TableExists(ns netns.NsHandle, family nftables.TableFamily, name string) (bool, error) {
	c, err := Open(ns)
	if err != nil {
		return false, err
	}
	tables, err := c.ListTablesOfFamily(family)
	if err != nil {
		return false, fmt.Errorf("list nftables tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == name {
			return true, nil
		}
	}
	return false, nil
}
