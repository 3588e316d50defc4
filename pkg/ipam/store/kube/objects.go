package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Group and Version of the IPAM's custom resources.
const (
	Group   = "ipam.causeway.net"
	Version = "v1alpha1"
)

// The resources of the store.
var (
	PoolResource  = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "ipampools"}
	BlockResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "ipamblocks"}
)

// TrenchLabel carries the trench (its object-name form) on every object, so
// that a store lists only its own trench's.
const TrenchLabel = Group + "/trench"

// poolSpec is the spec of an IPAMPool: one trench family, the index of what
// is carved in it.
type poolSpec struct {
	Trench        string         `json:"trench"`
	Family        string         `json:"family"`
	Prefix        string         `json:"prefix"`
	ConduitLength int            `json:"conduitLength"`
	NodeLength    int            `json:"nodeLength"`
	Heartbeat     string         `json:"heartbeat,omitempty"`
	ServedBy      string         `json:"servedBy,omitempty"`
	ConduitCount  int            `json:"conduitCount"`
	NodeCount     int            `json:"nodeCount"`
	Conduits      []conduitEntry `json:"conduits,omitempty"`
	Nodes         []nodeEntry    `json:"nodes,omitempty"`
}

type conduitEntry struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
}

type nodeEntry struct {
	Conduit string `json:"conduit"`
	Name    string `json:"name"`
	Prefix  string `json:"prefix"`
}

// An IPAMBlock's spec is built and read by hand (codec.go): trench,
// family, conduit, node, prefix, renewed, addressCount and leases, a map
// from each child's name to "<address> <renewed>" (see formatLease).
// Blocks written before the leases map hold a list of children instead,
// each {name, address, renewed}; they are read as well.

func familyName(f uint8) string {
	if f == 4 {
		return "ipv4"
	}
	return "ipv6"
}

func familyOf(name string) (uint8, error) {
	switch name {
	case "ipv4":
		return 4, nil
	case "ipv6":
		return 6, nil
	}
	return 0, fmt.Errorf("unknown family %q", name)
}

// formatTime renders a lease time; the zero time is "".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// trenchName is the trench in the form of an object name and label value:
// the name itself when it is a DNS label, a hash of it otherwise.
func trenchName(trench string) string {
	if len(validation.IsDNS1123Label(trench)) == 0 {
		return trench
	}
	sum := sha256.Sum256([]byte(trench))
	return "t" + hex.EncodeToString(sum[:8])
}

// poolName is the object name of a trench family's pool.
func poolName(trench string, family uint8) string {
	return trenchName(trench) + "-" + familyName(family)
}

// blockName is the object name of a node subnet's block: the pool's name
// and the prefix, e.g. default-ipv4-172-16-0-0-24; unique in a trench
// family, since node subnets do not overlap.
func blockName(trench string, family uint8, p netip.Prefix) string {
	a := strings.NewReplacer(".", "-", ":", "-").Replace(p.Addr().String())
	name := fmt.Sprintf("%s-%s-%d", poolName(trench, family), a, p.Bits())
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return poolName(trench, family) + "-" + hex.EncodeToString(sum[:8])
}
