package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/pkg/ipam/meridio"
	"github.com/causeway-net/causeway/pkg/ipam/meridio/meridiotest"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/bolt"
	"github.com/causeway-net/causeway/pkg/ipamd"
)

// writeMeridio writes a Meridio database of trench "default" at path and
// returns the address (with the node length) of every child.
func writeMeridio(t testing.TB, path string, specs ...meridiotest.Spec) map[childID]string {
	t.Helper()
	w := meridiotest.Create(t, path)
	out := map[childID]string{}
	for _, s := range specs {
		s.Trench = "default"
		for _, c := range w.Populate(s) {
			fam := ipamv1.IPFamily_IPV4
			if c.IPv6 {
				fam = ipamv1.IPFamily_IPV6
			}
			out[childID{fam, c.Conduit, c.Node, c.Name}] = c.Addr.String() + "/" + strconv.Itoa(c.NodeLength)
		}
	}
	w.Close()
	return out
}

func dualStack(updated time.Time, conduits, nodes, children int) []meridiotest.Spec {
	return []meridiotest.Spec{
		{Pool: "172.16.0.0/16", ConduitLength: 20, NodeLength: 24, Conduits: conduits, Nodes: nodes, Children: children, Updated: updated},
		{IPv6: true, Pool: "fd00::/48", ConduitLength: 56, NodeLength: 64, Conduits: conduits, Nodes: nodes, Children: children, Updated: updated},
	}
}

// TestImportOnStart: ipam started on a Meridio database imports it once:
// every child gets its old address back, new ones do not collide, the
// original is kept byte for byte beside the new store, and a restart does
// not import again.
func TestImportOnStart(t *testing.T) {
	bin := testIPAM(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "registry.db")
	old := writeMeridio(t, db, dualStack(time.Now().Add(-time.Minute), 2, 3, 11)...)
	original, err := os.ReadFile(db)
	require.NoError(t, err)

	// The environment's IPv4 pool differs: the stored one wins, with a warning.
	env := []string{"IPAM_DATASOURCE=" + db, "IPAM_PREFIX_IPV4=169.255.0.0/16"}
	p := startIPAM(t, bin, env...)
	assert.Equal(t, 1, p.logged("imported the Meridio IPAM database"))
	assert.Equal(t, 1, p.logged("configured pool differs from the stored one; keeping the stored one (delete the database to change it)"))
	assertReclaimed(t, p.client, old)
	require.NoError(t, p.kill(t, syscall.SIGTERM))

	aside, err := filepath.Glob(db + ".meridio-*")
	require.NoError(t, err)
	require.Len(t, aside, 1)
	kept, err := os.ReadFile(aside[0])
	require.NoError(t, err)
	assert.Equal(t, original, kept, "the original is kept as it was")
	isSQLite, err := meridio.IsSQLite(db)
	require.NoError(t, err)
	assert.False(t, isSQLite, "the datasource is the new store")

	p = startIPAM(t, bin, env...)
	assert.Zero(t, p.logged("the datasource is a Meridio IPAM database: importing it"))
	assertReclaimed(t, p.client, old)
	require.NoError(t, p.kill(t, syscall.SIGTERM))
}

// TestImportRefusals: a file that is neither a store nor a Meridio database
// makes ipam exit with a status of its own and a line saying what was
// found and what is expected; nothing is written.
func TestImportRefusals(t *testing.T) {
	bin := testIPAM(t)
	good := filepath.Join(t.TempDir(), "good.db")
	writeMeridio(t, good, dualStack(time.Now(), 2, 3, 40)...)
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		write  func(path string)
		status int
		want   string
	}{
		{"another sqlite schema", func(path string) {
			meridiotest.Create(t, path).Close()
			w := meridiotest.Open(t, path)
			w.Exec("DROP TABLE prefixes; CREATE TABLE accounts (id integer)")
			w.Close()
		}, ipamd.ExitStoreForeign, "found a SQLite database with the tables accounts but no table prefixes"},
		{"truncated sqlite", func(path string) {
			require.NoError(t, os.WriteFile(path, data[:len(data)/3], 0o600))
		}, ipamd.ExitStoreDamaged, "is damaged: found a SQLite file that cannot be read"},
		{"garbage", func(path string) {
			require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("garbage!"), 2000), 0o600))
		}, ipamd.ExitStoreDamaged, `found a file beginning with "garbage!garbage!`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "registry.db")
			tc.write(db)
			before, err := os.ReadFile(db)
			require.NoError(t, err)
			status, _, stderr := runIPAM(t, bin, nil, "IPAM_DATASOURCE="+db)
			msg := lastLine(stderr)
			t.Logf("exit %d: %s", status, msg)
			assert.Equal(t, tc.status, status)
			assert.Contains(t, msg, tc.want)
			assert.Contains(t, msg, meridio.Expected)
			after, err := os.ReadFile(db)
			require.NoError(t, err)
			assert.Equal(t, before, after, "left untouched")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 1, "nothing written beside it")
		})
	}
}

// TestImportCommand: "ipam import -dry-run" prints what it would import and
// writes nothing; without it the store is written.
func TestImportCommand(t *testing.T) {
	bin := testIPAM(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "meridio.db")
	old := writeMeridio(t, src, dualStack(time.Now().Add(-time.Minute), 2, 2, 5)...)
	db := filepath.Join(dir, "data", "registry.db")

	status, stdout, stderr := runIPAM(t, bin, []string{"import", "-from", src, "-dry-run"}, "IPAM_DATASOURCE="+db)
	require.Equal(t, 0, status, stderr)
	t.Logf("dry run:\n%s", stdout)
	assert.Contains(t, stdout, "dry run: would import "+src)
	assert.Contains(t, stdout, "trench default ipv4: pool 172.16.0.0/16, conduit /20 (stored), node /24 (stored): 2 conduits, 4 nodes, 20 children")
	assert.Contains(t, stdout, "total: 2 trench roots, 4 conduits, 8 nodes, 40 children")
	assert.NoFileExists(t, db)

	status, stdout, stderr = runIPAM(t, bin, []string{"import", "-from", src}, "IPAM_DATASOURCE="+db)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "imported "+src+" into "+db)
	c, err := bolt.Inspect(db)
	require.NoError(t, err)
	assert.Equal(t, bolt.Contents{Conduits: 4, Nodes: 8, Children: 40}, c)

	p := startIPAM(t, bin, "IPAM_DATASOURCE="+db)
	assertReclaimed(t, p.client, old)
	require.NoError(t, p.kill(t, syscall.SIGTERM))

	status, _, stderr = runIPAM(t, bin, []string{"import", "-from", db, "-dry-run"})
	assert.Equal(t, ipamd.ExitStoreForeign, status)
	assert.Contains(t, stderr, "does not begin with the SQLite header")
}

// bigMeridio is a database of 50,000 children (4 conduits x 10 nodes x
// 1,250), in IPv4 only.
func bigMeridio(t testing.TB, path string) map[childID]string {
	return writeMeridio(t, path, meridiotest.Spec{Pool: "10.0.0.0/8", ConduitLength: 12, NodeLength: 16,
		Conduits: 4, Nodes: 10, Children: 1250, Updated: time.Now().Add(-time.Minute).Truncate(time.Microsecond)})
}

// ipamEnv50k is the environment of an IPAM serving bigMeridio.
var ipamEnv50k = []string{"IPAM_IP_FAMILY=ipv4", "IPAM_PREFIX_IPV4=10.0.0.0/8", "IPAM_CONDUIT_PREFIX_LENGTH_IPV4=12",
	"IPAM_NODE_PREFIX_LENGTH_IPV4=16", "IPAM_SNAPSHOT_KEEP=0"}

// loadStore returns every record of the store at path.
func loadStore(t *testing.T, path string) []store.Record {
	t.Helper()
	st, err := bolt.Open(path, time.Second)
	require.NoError(t, err)
	defer st.Close()
	recs, err := st.Load(context.Background())
	require.NoError(t, err)
	return recs
}

// startUntil runs bin with env and returns once a log line has the message
// msg.
func startUntil(t *testing.T, bin, msg string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = testEnv(env...)
	p, _ := launch(t, cmd, msg, 120*time.Second)
	return p
}

// TestImportInterruptedByKill: kill -9 of ipam at points spread over a
// large import leaves at the datasource either the original file, byte for
// byte, or the complete store; after a restart the store is identical to
// that of an uninterrupted import.
func TestImportInterruptedByKill(t *testing.T) {
	bin := testIPAM(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "meridio.db")
	bigMeridio(t, src)
	original, err := os.ReadFile(src)
	require.NoError(t, err)

	ref := filepath.Join(dir, "ref", "registry.db")
	start := time.Now()
	status, stdout, stderr := runIPAM(t, bin, []string{"import", "-from", src}, append(ipamEnv50k, "IPAM_DATASOURCE="+ref)...)
	require.Equal(t, 0, status, stderr)
	took := time.Since(start)
	t.Logf("FIGURE: uninterrupted import of 50,000 children by the binary (process start included): %s\n%s", took.Round(time.Millisecond), stdout)
	want := loadStore(t, ref)

	db := filepath.Join(dir, "data", "registry.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(db), 0o750))
	env := append(ipamEnv50k, "IPAM_DATASOURCE="+db)
	mid, building := 0, 0
	const kills = 12
	for i := 0; i < kills; i++ {
		if ok, _ := meridio.IsSQLite(db); !ok {
			startOver(t, db, original)
		}
		p := startUntil(t, bin, "the datasource is a Meridio IPAM database: importing it", env...)
		time.Sleep(took * time.Duration(i) * 6 / 5 / kills) // up to 1.2 times the whole import
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		now, err := os.ReadFile(db)
		require.NoError(t, err)
		if bytes.Equal(now, original) {
			mid++
			if tmp, _ := filepath.Glob(db + ".import*"); len(tmp) > 0 {
				building++ // killed while the new store was being written
			}
			continue
		}
		assert.Equal(t, want, loadStore(t, db), "kill %d: the store is complete", i)
	}
	t.Logf("FIGURE: %d of %d kills left the original in place (%d while the new store was half written), the others the complete store",
		mid, kills, building)
	assert.Positive(t, building, "some kill landed inside the import")

	if ok, _ := meridio.IsSQLite(db); !ok {
		startOver(t, db, original)
		p := startUntil(t, bin, "the datasource is a Meridio IPAM database: importing it", env...)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	p := startUntil(t, bin, "serving", env...)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	assert.Equal(t, want, loadStore(t, db), "after the restart: identical to the uninterrupted import")
	aside, err := filepath.Glob(db + ".meridio-*")
	require.NoError(t, err)
	require.Len(t, aside, 1, "one original kept, whatever the crashes")
	kept, err := os.ReadFile(aside[0])
	require.NoError(t, err)
	assert.True(t, bytes.Equal(original, kept))
}

// startOver puts the original Meridio database back at db after a
// completed import, with the kept original removed.
func startOver(t *testing.T, db string, original []byte) {
	t.Helper()
	aside, err := filepath.Glob(db + ".meridio-*")
	require.NoError(t, err)
	for _, a := range aside {
		require.NoError(t, os.Remove(a))
	}
	if err := os.Remove(db); !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(db, original, 0o600))
}

// peakRSS returns the peak and current resident memory of pid in MiB.
func peakRSS(t testing.TB, pid int) (peak, now float64) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmHWM:":
			peak = float64(kb) / 1024
		case "VmRSS:":
			now = float64(kb) / 1024
		}
	}
	return peak, now
}

// BenchmarkRSSImport50k reports the start of ipam on a Meridio database of
// 50,000 children, import included (start-with-import-ms, until it
// serves), and its resident memory: the peak of import and start
// (peak-MiB), after every child is renewed through gRPC (RSS-MiB), and the
// time and peak of a restart on the imported store (restart-ms,
// restart-peak-MiB). b.N is ignored.
func BenchmarkRSSImport50k(b *testing.B) {
	bin := buildIPAM(b)
	dir := b.TempDir()
	db := filepath.Join(dir, "registry.db")
	old := bigMeridio(b, db)
	env := append(ipamEnv50k, "IPAM_DATASOURCE="+db)
	b.ResetTimer()
	start := time.Now()
	p := startIPAM(b, bin, env...)
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "start-with-import-ms")
	peak, _ := peakRSS(b, p.cmd.Process.Pid)
	b.ReportMetric(peak, "peak-MiB")
	var ids []childID
	for id := range old {
		ids = append(ids, id)
	}
	allocateAll(b, p.client, ids) // every proxy renews
	_, now := peakRSS(b, p.cmd.Process.Pid)
	b.ReportMetric(now, "RSS-MiB")
	require.NoError(b, p.kill(b, syscall.SIGTERM))

	start = time.Now()
	p = startIPAM(b, bin, env...)
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "restart-ms")
	peak, _ = peakRSS(b, p.cmd.Process.Pid)
	b.ReportMetric(peak, "restart-peak-MiB")
	require.NoError(b, p.kill(b, syscall.SIGTERM))
}

// BenchmarkRSSRestart50k reports the resident memory of ipam holding 50,000
// allocations made through gRPC (RSS-MiB: the running figure), and the
// peak of a restart on that store (restart-peak-MiB) with its ratio to the
// running figure (peak/running). b.N is ignored.
func BenchmarkRSSRestart50k(b *testing.B) {
	bin := buildIPAM(b)
	env := append(ipamEnv50k, "IPAM_DATASOURCE="+filepath.Join(b.TempDir(), "registry.db"))
	var ids []childID
	for i := 0; i < 50000; i++ {
		ids = append(ids, childID{ipamv1.IPFamily_IPV4, fmt.Sprintf("conduit-%d", i%4), fmt.Sprintf("worker-%d", i%40),
			fmt.Sprintf("target-%d-proxy.conduit.default.ns-0-src", i)})
	}
	p := startIPAM(b, bin, env...)
	allocateAll(b, p.client, ids)
	_, running := peakRSS(b, p.cmd.Process.Pid)
	require.NoError(b, p.kill(b, syscall.SIGTERM))
	b.ResetTimer()
	p = startIPAM(b, bin, env...)
	peak, _ := peakRSS(b, p.cmd.Process.Pid)
	b.ReportMetric(running, "RSS-MiB")
	b.ReportMetric(peak, "restart-peak-MiB")
	b.ReportMetric(peak/running, "peak/running")
	require.NoError(b, p.kill(b, syscall.SIGTERM))
}
