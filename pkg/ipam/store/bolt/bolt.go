// Package bolt is the durable, embedded store.Store of the IPAM, on bbolt.
//
// A B+tree rewrites every leaf page a transaction touches, so committing a
// batch of changes scattered over many nodes would write (and fsync) one 4 KiB
// page per change. Apply therefore appends the batch to a journal bucket with
// sequential keys (a few pages per commit, whatever the batch size), and a
// background compactor moves journal entries, oldest first and in bounded
// chunks, into the main bucket. Load reads the main bucket and replays the
// journal, so the state is the same at any point of a compaction.
//
// The package also owns the file's integrity: Open checks an existing file
// before bbolt maps it and refuses a damaged one with a *DamagedError
// (check.go, open.go); Snapshots keeps consistent copies and Restore puts
// one back (snapshot.go).
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

var (
	mainBucket    = []byte("prefixes")
	journalBucket = []byte("journal")
)

const (
	// compactAfter is the journal length that triggers a compaction.
	compactAfter = 4096
	// compactChunk bounds the entries moved per transaction, so that a
	// compaction never delays an Apply for long.
	compactChunk = 512
)

// Store is a bbolt-backed store.Store.
type Store struct {
	db      *bbolt.DB
	path    string
	log     *slog.Logger
	journal atomic.Int64 // entries in the journal (approximate)
	kick    chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

var _ store.Store = (*Store)(nil)

// Open opens the database at path, compacts its journal and starts the
// background compactor. Only a missing file is a new store: it is created
// (with its parent directory) under a temporary name and renamed into
// place, so that a file at path is always a complete database. An existing
// file is checked first (see Check); a damaged one is refused with a
// *DamagedError and left untouched. Open fails after lockTimeout if another
// process holds the file.
func Open(path string, lockTimeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create directory of %s: %w", path, err)
	}
	if err := createIfMissing(path); err != nil {
		return nil, err
	}
	db, err := openChecked(path, lockTimeout, false)
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(mainBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(journalBucket)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create buckets in %s: %w", path, err)
	}
	s := &Store{db: db, path: path, log: slog.Default(), kick: make(chan struct{}, 1), stop: make(chan struct{})}
	if err := s.compact(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("compact journal of %s: %w", path, err)
	}
	s.wg.Add(1)
	go s.compactor()
	return s, nil
}

// options are the bbolt options of every open.
func options(lockTimeout time.Duration, readOnly bool) *bbolt.Options {
	return &bbolt.Options{
		Timeout:  lockTimeout,
		ReadOnly: readOnly,
		// The freelist is rebuilt on open instead of being written on
		// every commit: fewer pages per fsync.
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	}
}

// Load returns every record in key order: the main bucket with the journal
// replayed on top.
func (s *Store) Load(context.Context) ([]store.Record, error) {
	state := map[string][]byte{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(mainBucket).ForEach(func(k, v []byte) error {
			state[string(k)] = bytes.Clone(v)
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(journalBucket).ForEach(func(_, e []byte) error {
			kind, key, val, err := decodeEntry(e)
			if err != nil {
				return err
			}
			switch kind {
			case store.OpPut:
				state[string(key)] = bytes.Clone(val)
			case store.OpDelete:
				delete(state, string(key))
				sub := string(key) + "\x00"
				for k := range state {
					if len(k) > len(sub) && k[:len(sub)] == sub {
						delete(state, k)
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load: %w", damaged(s.path, "%v", err))
	}
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]store.Record, 0, len(keys))
	for _, k := range keys {
		key, err := store.DecodeKey([]byte(k))
		if err != nil {
			return nil, fmt.Errorf("load: %w", damaged(s.path, "%v", err))
		}
		r, err := store.DecodeValue(key, state[k])
		if err != nil {
			return nil, fmt.Errorf("load: %w", damaged(s.path, "key %q: %v", k, err))
		}
		out = append(out, r)
	}
	return out, nil
}

var _ store.Streamer = (*Store)(nil)

// Each calls f with every record in key order. With an empty journal (as
// after Open, which compacts it) the records are decoded one at a time
// from the main bucket; otherwise Load builds the list first.
func (s *Store) Each(ctx context.Context, f func(store.Record) error) error {
	var empty bool
	if err := s.db.View(func(tx *bbolt.Tx) error {
		k, _ := tx.Bucket(journalBucket).Cursor().First()
		empty = k == nil
		if !empty {
			return nil
		}
		return tx.Bucket(mainBucket).ForEach(func(k, v []byte) error {
			key, err := store.DecodeKey(k)
			if err != nil {
				return damaged(s.path, "%v", err)
			}
			r, err := store.DecodeValue(key, v)
			if err != nil {
				return damaged(s.path, "key %q: %v", k, err)
			}
			return f(r)
		})
	}); err != nil || empty {
		return err
	}
	recs, err := s.Load(ctx)
	if err != nil {
		return err
	}
	return store.Walk(recs, f)
}

// Apply appends ops to the journal in one transaction and commits it (with
// fsync).
func (s *Store) Apply(_ context.Context, ops []store.Op) error {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		j := tx.Bucket(journalBucket)
		for _, op := range ops {
			e, err := encodeEntry(op)
			if err != nil {
				return err
			}
			seq, err := j.NextSequence()
			if err != nil {
				return err
			}
			if err := j.Put(binary.BigEndian.AppendUint64(nil, seq), e); err != nil {
				return fmt.Errorf("journal put: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply %d ops: %w", len(ops), err)
	}
	if s.journal.Add(int64(len(ops))) >= compactAfter {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

func (s *Store) compactor() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			if err := s.compact(); err != nil {
				s.log.Error("ipam store: journal compaction failed", "error", err)
			}
		}
	}
}

// compact moves the whole journal into the main bucket, in chunks.
func (s *Store) compact() error {
	for {
		moved := 0
		err := s.db.Update(func(tx *bbolt.Tx) error {
			m, j := tx.Bucket(mainBucket), tx.Bucket(journalBucket)
			c := j.Cursor()
			for k, e := c.First(); k != nil && moved < compactChunk; k, e = c.First() {
				kind, key, val, err := decodeEntry(e)
				if err != nil {
					return fmt.Errorf("journal entry %x: %w", k, err)
				}
				switch kind {
				case store.OpPut:
					err = m.Put(key, val)
				case store.OpDelete:
					err = deleteTree(m, key)
				}
				if err != nil {
					return err
				}
				if err := c.Delete(); err != nil {
					return err
				}
				moved++
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.journal.Add(-int64(moved))
		if moved < compactChunk {
			s.journal.Store(0)
			return nil
		}
	}
}

// deleteTree deletes key and every key below it.
func deleteTree(b *bbolt.Bucket, key []byte) error {
	if err := b.Delete(key); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	sub := append(bytes.Clone(key), 0)
	c := b.Cursor()
	for k, _ := c.Seek(sub); k != nil && bytes.HasPrefix(k, sub); k, _ = c.Seek(sub) {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("delete %q: %w", k, err)
		}
	}
	return nil
}

// A journal entry is the op kind, the key length (uvarint), the key and, for
// puts, the encoded value.
func encodeEntry(op store.Op) ([]byte, error) {
	key := store.EncodeKey(op.Record.Key)
	e := []byte{byte(op.Kind)}
	e = binary.AppendUvarint(e, uint64(len(key)))
	e = append(e, key...)
	switch op.Kind {
	case store.OpPut:
		v, err := store.EncodeValue(op.Record)
		if err != nil {
			return nil, err
		}
		e = append(e, v...)
	case store.OpDelete:
	default:
		return nil, errors.New("unknown op")
	}
	return e, nil
}

func decodeEntry(e []byte) (store.OpKind, []byte, []byte, error) {
	if len(e) < 2 {
		return 0, nil, nil, errors.New("short journal entry")
	}
	kind := store.OpKind(e[0])
	n, w := binary.Uvarint(e[1:])
	if w <= 0 || uint64(len(e)-1-w) < n {
		return 0, nil, nil, errors.New("malformed journal entry")
	}
	key := e[1+w : 1+w+int(n)]
	val := e[1+w+int(n):]
	if kind != store.OpPut && kind != store.OpDelete {
		return 0, nil, nil, fmt.Errorf("unknown journal op %d", kind)
	}
	return kind, key, val, nil
}

// Close stops the compactor and closes the database. The journal is kept;
// the next Open compacts it.
func (s *Store) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
	return s.db.Close()
}
