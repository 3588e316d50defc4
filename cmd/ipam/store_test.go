package main

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipamd"
)

// testEnv is the environment of the binary tests' ipam: no NSP, free
// ports on loopback, plain gRPC; env is added after it.
func testEnv(env ...string) []string {
	return append([]string{"IPAM_NSP_SERVICE=", "IPAM_PORT=0", "IPAM_LISTEN_ADDRESS=127.0.0.1", "IPAM_METRICS_PORT=0",
		"IPAM_LOG_LEVEL=INFO", "IPAM_INSECURE=true"}, env...)
}

// runIPAM runs bin to its end with env and returns its exit status and
// standard error.
func runIPAM(t *testing.T, bin string, args []string, env ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = testEnv(env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v did not exit; stderr: %s", bin, args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// damage applies one of the damages an operator has seen to the file.
func damage(t *testing.T, path, how string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	switch how {
	case "corrupted data pages":
		r := rand.New(rand.NewSource(7))
		for off := 2 * 4096; off+4096 <= len(data); off += 4096 {
			r.Read(data[off+16 : off+4096-16]) // page headers left, contents garbage
			data[off] ^= 0x01                  // and every page claims another id
		}
		require.NoError(t, os.WriteFile(path, data, 0o600))
	case "truncated to half":
		require.NoError(t, os.Truncate(path, int64(len(data)/2)))
	case "0-byte":
		require.NoError(t, os.Truncate(path, 0))
	default:
		t.Fatalf("unknown damage %q", how)
	}
}

// TestDamagedStoreIsRefusedClearly: each damage makes ipam exit with its own
// status and one line naming the file, what is wrong and what to do; no
// panic or fault reaches the user and the file is left as it was.
func TestDamagedStoreIsRefusedClearly(t *testing.T) {
	bin := testIPAM(t)
	for _, how := range []string{"corrupted data pages", "truncated to half", "0-byte"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "registry.db")
			env := []string{"IPAM_DATASOURCE=" + db, "IPAM_SNAPSHOT_KEEP=0"}
			p := startIPAM(t, bin, env...)
			allocateAll(t, p.client, children("c", 1000))
			require.NoError(t, p.kill(t, syscall.SIGTERM))
			damage(t, db, how)
			before, err := os.ReadFile(db)
			require.NoError(t, err)

			status, _, stderr := runIPAM(t, bin, nil, env...)
			assert.Equal(t, ipamd.ExitStoreDamaged, status, "stderr: %s", stderr)
			msg := lastLine(stderr)
			t.Logf("message: %s", msg)
			assert.True(t, strings.HasPrefix(msg, "ipam: store "+db+" is damaged ("), "names the file: %s", msg)
			want := map[string]string{"corrupted data pages": "page", "truncated to half": "truncated", "0-byte": "empty file, 0 bytes"}[how]
			assert.Contains(t, msg, want, "says what is wrong")
			assert.Contains(t, msg, "no snapshot in "+filepath.Join(dir, "snapshots"), "says what to do")
			assert.Contains(t, msg, "docs/ipam-store.md")
			for _, crash := range []string{"panic", "fatal error", "SIGBUS", "goroutine "} {
				assert.NotContains(t, stderr, crash)
			}
			after, err := os.ReadFile(db)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the file is left untouched")
		})
	}
}

// TestRestoreFromSnapshot: a periodic snapshot, then a crash and a damaged
// store; "ipam restore" puts the newest snapshot back and keeps the damaged
// file aside; after the restart every child gets its old address again on
// renewal and new children do not collide with them.
func TestRestoreFromSnapshot(t *testing.T) {
	bin := testIPAM(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "data", "registry.db")
	env := []string{"IPAM_DATASOURCE=" + db, "IPAM_SNAPSHOT_INTERVAL=200ms", "IPAM_SNAPSHOT_KEEP=3"}

	p := startIPAM(t, bin, env...)
	old := allocateAll(t, p.client, children("old", 1000))
	// Two more snapshots: the second one started after every allocation
	// above was acknowledged.
	n := p.logged("store snapshot taken")
	require.Eventually(t, func() bool { return p.logged("store snapshot taken") >= max(n+2, 3) }, 30*time.Second, 20*time.Millisecond)
	require.Error(t, p.kill(t, syscall.SIGKILL), "killed: no snapshot at stop")
	snaps, err := filepath.Glob(filepath.Join(dir, "data", "snapshots", "registry.db.*.snapshot"))
	require.NoError(t, err)
	assert.Len(t, snaps, 3, "the newest 3 are kept")

	damage(t, db, "truncated to half")
	status, _, stderr := runIPAM(t, bin, nil, env...)
	require.Equal(t, ipamd.ExitStoreDamaged, status, stderr)
	assert.Contains(t, lastLine(stderr), "run: ipam restore -datasource "+db)

	status, stdout, stderr := runIPAM(t, bin, []string{"restore"}, env...)
	require.Equal(t, 0, status, "stdout: %s\nstderr: %s", stdout, stderr)
	t.Logf("ipam restore:\n%s", stdout)
	assert.Contains(t, stdout, "restored "+db+" from ")
	assert.Contains(t, stdout, "1000 child allocations")
	assert.Contains(t, stdout, "the damaged file is kept at "+db+".damaged-")
	assert.Contains(t, stdout, "the snapshot lacks what changed after")
	aside, err := filepath.Glob(db + ".damaged-*")
	require.NoError(t, err)
	require.Len(t, aside, 1)

	p = startIPAM(t, bin, env...)
	assertReclaimed(t, p.client, old)
	assert.NoError(t, p.kill(t, syscall.SIGTERM))

	// A restore while the IPAM runs is refused; so is a damaged -from.
	p = startIPAM(t, bin, env...)
	status, _, stderr = runIPAM(t, bin, []string{"restore"}, env...)
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, "is in use")
	assert.NoError(t, p.kill(t, syscall.SIGTERM))
	status, _, stderr = runIPAM(t, bin, []string{"restore", "-from", aside[0]}, env...)
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, "is damaged")
}
