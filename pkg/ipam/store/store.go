// Package store defines what the IPAM engine persists and the Store interface
// its durable back ends implement: a flat, ordered set of records keyed by
// their path trench → family → conduit → node → child, written in atomic
// batches.
package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Level says which part of the carving tree a record is.
type Level uint8

// The levels of the carving tree, root first.
const (
	LevelTrench Level = iota + 1
	LevelConduit
	LevelNode
	LevelChild
)

// String names the level.
func (l Level) String() string {
	switch l {
	case LevelTrench:
		return "trench"
	case LevelConduit:
		return "conduit"
	case LevelNode:
		return "node"
	case LevelChild:
		return "child"
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// Key is the path of a record. Fields below Level are ignored. Family is 4 or
// 6. Names never contain a NUL byte (the engine validates them).
type Key struct {
	Level   Level
	Trench  string
	Family  uint8
	Conduit string
	Node    string
	Child   string
}

// Record is one stored prefix.
type Record struct {
	Key Key
	// Prefix is the trench pool, the conduit or node subnet, or the child
	// address as a /32 or /128.
	Prefix netip.Prefix
	// Updated is the last persisted lease renewal (nodes and children) or the
	// last time the engine was known alive (trench).
	Updated time.Time
	// ConduitLength and NodeLength are the carving geometry of a trench.
	// Zero on other levels.
	ConduitLength, NodeLength uint8
}

// OpKind is what an Op does.
type OpKind uint8

// Op kinds.
const (
	// OpPut creates or replaces a record.
	OpPut OpKind = iota + 1
	// OpDelete removes the record at Key and everything below it. Deleting a
	// missing key is not an error.
	OpDelete
)

// Op is one change in a batch.
type Op struct {
	Kind   OpKind
	Record Record // only Record.Key for OpDelete
}

// Store persists records. Implementations are safe for concurrent use.
type Store interface {
	// Load returns every stored record, in key order.
	Load(ctx context.Context) ([]Record, error)
	// Apply applies ops in order, atomically: when it returns nil all of them
	// are durable, otherwise none is applied.
	Apply(ctx context.Context, ops []Op) error
	// Close releases the store.
	Close() error
}

// Streamer is a Store that can also pass its records one at a time, in key
// order, without building the whole list: a large store is then never held
// in memory twice while it is loaded.
type Streamer interface {
	// Each calls f with every stored record, in key order, and stops at
	// the first error f returns.
	Each(ctx context.Context, f func(Record) error) error
}

// Each passes the records of st to f in key order: streamed if st is a
// Streamer, from Load otherwise.
func Each(ctx context.Context, st Store, f func(Record) error) error {
	if s, ok := st.(Streamer); ok {
		return s.Each(ctx, f)
	}
	records, err := st.Load(ctx)
	if err != nil {
		return err
	}
	return Walk(records, f)
}

// Walk calls f with each record in turn and stops at the first error.
func Walk(records []Record, f func(Record) error) error {
	for _, r := range records {
		if err := f(r); err != nil {
			return err
		}
	}
	return nil
}

// sep separates the path components of an encoded key.
const sep = "\x00"

// EncodeKey returns the byte key of k. Keys sort parent first, and every key
// below k starts with SubtreePrefix(k).
func EncodeKey(k Key) []byte {
	parts := []string{k.Trench, familyString(k.Family)}
	switch k.Level {
	case LevelChild:
		parts = append(parts, k.Conduit, k.Node, k.Child)
	case LevelNode:
		parts = append(parts, k.Conduit, k.Node)
	case LevelConduit:
		parts = append(parts, k.Conduit)
	}
	return []byte(strings.Join(parts, sep))
}

// SubtreePrefix is the common prefix of the keys of every record below k.
func SubtreePrefix(k Key) []byte {
	return append(EncodeKey(k), sep...)
}

func familyString(f uint8) string {
	return fmt.Sprintf("%d", f)
}

// DecodeKey parses a key made by EncodeKey.
func DecodeKey(b []byte) (Key, error) {
	parts := strings.Split(string(b), sep)
	if len(parts) < 2 || len(parts) > 5 {
		return Key{}, fmt.Errorf("malformed key %q", b)
	}
	var k Key
	switch parts[1] {
	case "4":
		k.Family = 4
	case "6":
		k.Family = 6
	default:
		return Key{}, fmt.Errorf("malformed key %q: family %q", b, parts[1])
	}
	k.Trench = parts[0]
	k.Level = Level(len(parts) - 1)
	if len(parts) > 2 {
		k.Conduit = parts[2]
	}
	if len(parts) > 3 {
		k.Node = parts[3]
	}
	if len(parts) > 4 {
		k.Child = parts[4]
	}
	return k, nil
}

const valueVersion = 1

// EncodeValue returns the stored bytes of r (everything but the key).
func EncodeValue(r Record) ([]byte, error) {
	p, err := r.Prefix.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode prefix %v: %w", r.Prefix, err)
	}
	b := make([]byte, 0, 11+len(p))
	b = append(b, valueVersion)
	var ts int64
	if !r.Updated.IsZero() {
		ts = r.Updated.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	b = append(b, r.ConduitLength, r.NodeLength)
	return append(b, p...), nil
}

// DecodeValue fills the non-key fields of a record from stored bytes.
func DecodeValue(k Key, b []byte) (Record, error) {
	if len(b) < 11 || b[0] != valueVersion {
		return Record{}, errors.New("malformed value")
	}
	r := Record{Key: k, ConduitLength: b[9], NodeLength: b[10]}
	if ts := int64(binary.BigEndian.Uint64(b[1:9])); ts != 0 {
		r.Updated = time.Unix(0, ts).UTC()
	}
	if err := r.Prefix.UnmarshalBinary(b[11:]); err != nil {
		return Record{}, fmt.Errorf("malformed prefix: %w", err)
	}
	return r, nil
}
