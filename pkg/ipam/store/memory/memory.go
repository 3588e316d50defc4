// Package memory is an in-memory store.Store for tests: it keeps every record
// in a map and can be told to fail, to exercise the engine's error paths.
package memory

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// Store is an in-memory store.Store. The zero value is not usable; use New.
type Store struct {
	mu      sync.Mutex
	records map[string]store.Record
	fail    error
	applies int
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{records: map[string]store.Record{}}
}

// SetFailure makes every following Apply and Load return err (nil heals).
func (s *Store) SetFailure(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Applies returns how many batches were applied successfully.
func (s *Store) Applies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applies
}

// Load returns all records in key order.
func (s *Store) Load(context.Context) ([]store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	keys := make([]string, 0, len(s.records))
	for k := range s.records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]store.Record, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.records[k])
	}
	return out, nil
}

// Apply applies ops atomically. Records go through the codec, as in a
// durable store, so that Load returns what a bolt store returns.
func (s *Store) Apply(_ context.Context, ops []store.Op) error {
	recs := make([]store.Record, len(ops))
	for i, op := range ops {
		key, err := store.DecodeKey(store.EncodeKey(op.Record.Key))
		if err != nil {
			return err
		}
		recs[i].Key = key
		if op.Kind == store.OpPut {
			v, err := store.EncodeValue(op.Record)
			if err != nil {
				return err
			}
			if recs[i], err = store.DecodeValue(key, v); err != nil {
				return err
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for i, op := range ops {
		k := string(store.EncodeKey(recs[i].Key))
		switch op.Kind {
		case store.OpPut:
			s.records[k] = recs[i]
		case store.OpDelete:
			delete(s.records, k)
			sub := string(store.SubtreePrefix(recs[i].Key))
			for key := range s.records {
				if strings.HasPrefix(key, sub) {
					delete(s.records, key)
				}
			}
		}
	}
	s.applies++
	return nil
}

// Close does nothing.
func (s *Store) Close() error { return nil }
