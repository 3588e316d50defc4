// Package bolt is the durable, embedded store.Store of the IPAM, on bbolt. A
// batch is one read-write transaction, so one Apply costs one commit (with
// fsync); the engine groups concurrent changes into one batch.
package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

var bucketName = []byte("prefixes")

// Store is a bbolt-backed store.Store.
type Store struct {
	db *bbolt.DB
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed, with its parent directory) the database at
// path. It fails after lockTimeout if another process holds the file.
func Open(path string, lockTimeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create directory of %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout: lockTimeout,
		// The freelist is rebuilt on open instead of being written on
		// every commit: fewer pages per fsync.
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketName)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create bucket in %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Load returns every record in key order. Undecodable entries are an error.
func (s *Store) Load(context.Context) ([]store.Record, error) {
	var out []store.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketName).ForEach(func(k, v []byte) error {
			key, err := store.DecodeKey(k)
			if err != nil {
				return err
			}
			r, err := store.DecodeValue(key, v)
			if err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	return out, nil
}

// Apply applies ops in one transaction and commits it (with fsync).
func (s *Store) Apply(_ context.Context, ops []store.Op) error {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketName)
		for _, op := range ops {
			key := store.EncodeKey(op.Record.Key)
			switch op.Kind {
			case store.OpPut:
				v, err := store.EncodeValue(op.Record)
				if err != nil {
					return err
				}
				if err := b.Put(key, v); err != nil {
					return fmt.Errorf("put %q: %w", key, err)
				}
			case store.OpDelete:
				if err := deleteTree(b, key, store.SubtreePrefix(op.Record.Key)); err != nil {
					return err
				}
			default:
				return errors.New("unknown op")
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply %d ops: %w", len(ops), err)
	}
	return nil
}

func deleteTree(b *bbolt.Bucket, key, sub []byte) error {
	if err := b.Delete(key); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	c := b.Cursor()
	for k, _ := c.Seek(sub); k != nil && bytes.HasPrefix(k, sub); k, _ = c.Seek(sub) {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("delete %q: %w", k, err)
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	return s.db.Close()
}
