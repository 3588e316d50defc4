package ipamd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/ipam/meridio"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
)

// ExitStoreDamaged is the exit status of ipam when its store file is
// damaged (empty, truncated or inconsistent): not 1 (any other failure),
// not 2 (a configuration error). Restarting does not help; a restore does.
const ExitStoreDamaged = 3

// StoreDoc is the document that explains the store, its snapshots and the
// restore procedure.
const StoreDoc = "docs/ipam-store.md"

// snapshots returns where the store's snapshots are kept.
func (c *Config) snapshots() bolt.Snapshots {
	dir := c.SnapshotDir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(c.Datasource), "snapshots")
	}
	return bolt.Snapshots{Dir: dir, Base: filepath.Base(c.Datasource), Keep: c.SnapshotKeep}
}

// openStore opens the datasource; a damaged file is a *daemon.ExitError
// (see damageExit).
func openStore(c *Config) (*bolt.Store, error) {
	st, err := bolt.Open(c.Datasource, 10*time.Second)
	if err != nil {
		return nil, damageExit(c, fmt.Errorf("store: %w", err))
	}
	return st, nil
}

// damageExit turns an error that says the store is damaged into a
// *daemon.ExitError with ExitStoreDamaged and a one-line message saying
// what to do; other errors are returned as they are.
func damageExit(c *Config, err error) error {
	var d *bolt.DamagedError
	if !errors.As(err, &d) {
		return err
	}
	return &daemon.ExitError{Status: ExitStoreDamaged, Message: damagedMessage(d, c.snapshots()), Err: err}
}

// damagedMessage tells the operator, on one line, what is wrong with the
// file and what to do.
func damagedMessage(d *bolt.DamagedError, sn bolt.Snapshots) string {
	what := fmt.Sprintf("%s%s; the IPAM does not start on it and leaves it untouched", d.Error(), unrecognised(d.Path))
	list, err := sn.List()
	switch {
	case err != nil:
		return fmt.Sprintf("%s. Snapshots in %s cannot be listed (%v); see %s", what, sn.Dir, err, StoreDoc)
	case len(list) == 0:
		return fmt.Sprintf("%s. There is no snapshot in %s: move the file aside to start with an empty store "+
			"(the proxies' renewals re-claim the addresses they hold); see %s", what, sn.Dir, StoreDoc)
	}
	return fmt.Sprintf("%s. To put back the newest valid snapshot (%d in %s, newest %s), run: ipam restore -datasource %s; see %s",
		what, len(list), sn.Dir, list[0].Time.Format(time.RFC3339), d.Path, StoreDoc)
}

// unrecognised says what a file that does not begin as a bbolt file (nor a
// SQLite one: those are imported) begins with, and what is expected; "" for
// a file that begins as bbolt.
func unrecognised(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 32)
	n, _ := io.ReadFull(f, head)
	if n == 0 || (n >= 20 && binary.NativeEndian.Uint32(head[16:20]) == bboltMagic) {
		return ""
	}
	return fmt.Sprintf(": found a file beginning with %q; %s", head[:n], meridio.Expected)
}

// bboltMagic is the magic number in the header page of a bbolt file.
const bboltMagic = 0xED0CDAED

// snapshotter takes the store's snapshots: every interval and once more,
// after the engine's last commit, at close.
type snapshotter struct {
	sn       bolt.Snapshots
	st       *bolt.Store
	interval time.Duration
	log      *slog.Logger
	results  *prometheus.CounterVec // by result: ok, error
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startSnapshots starts the periodic snapshots (none if SnapshotKeep is 0).
func startSnapshots(c *Config, st *bolt.Store, log *slog.Logger) *snapshotter {
	s := &snapshotter{sn: c.snapshots(), st: st, interval: c.SnapshotInterval, log: log, stop: make(chan struct{}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "causeway_ipam_store_snapshots_total",
			Help: "Store snapshots attempted, by result (ok, error: e.g. the live store is damaged).",
		}, []string{"result"}),
	}
	if c.SnapshotKeep == 0 {
		log.Info("IPAM_SNAPSHOT_KEEP is 0: no store snapshots")
		return s
	}
	if s.interval > 0 {
		s.wg.Add(1)
		go s.run()
	}
	return s
}

func (s *snapshotter) run() {
	defer s.wg.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.take("periodic")
		case <-s.stop:
			return
		}
	}
}

// take takes one snapshot; a failure is logged (the store itself is not
// affected).
func (s *snapshotter) take(why string) {
	start := time.Now()
	path, err := s.sn.Take(s.st, start)
	if err != nil {
		s.results.WithLabelValues("error").Inc()
		s.log.Error("store snapshot failed", "reason", why, "error", err)
		return
	}
	s.results.WithLabelValues("ok").Inc()
	s.log.Info("store snapshot taken", "reason", why, "path", path, "duration", time.Since(start).String(), "kept", s.sn.Keep)
}

// stopLoop stops the periodic snapshots and waits for them.
func (s *snapshotter) stopLoop() {
	close(s.stop)
	s.wg.Wait()
}

// final takes the snapshot of a stop; call it after the engine's last
// commit, before the store closes.
func (s *snapshotter) final() {
	if s.sn.Keep > 0 {
		s.take("stop")
	}
}
