package nspd

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitFor = 30 * time.Second

const yaml = `
trenches: [{name: t}]
conduits: [{name: lb, trench: t}]
vips: [{name: v, address: 20.0.0.1/32, trench: t}]
`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path+".tmp", []byte(content), 0o644))
	require.NoError(t, os.Rename(path+".tmp", path))
}

// TestRunServesFollowsAndStops: Run serves the file on the port it logs,
// sends an edit to an open watch and, when its context ends, closes the
// watches with Unavailable and returns nil.
func TestRunServesFollowsAndStops(t *testing.T) {
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", "")
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	writeFile(t, path, yaml)
	cfg, err := Load()
	require.NoError(t, err)
	cfg.ConfigFile, cfg.Port, cfg.ConfigPollInterval = path, 0, 50*time.Millisecond
	cfg.Insecure = true // plain gRPC is asked for explicitly

	var log testutil.JSONLog
	logger, _ := logging.New(io.MultiWriter(&log, t.Output()), "nsp", slog.LevelDebug)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	returned := make(chan struct{})
	go func() { done <- Run(ctx, cfg, logger); close(returned) }()
	defer func() { cancel(); <-returned }() // no log line after the test
	serving, i := log.Wait(waitFor, returned, 0, "serving")
	if i < 0 {
		select {
		case err := <-done:
			t.Fatalf("Run returned before serving: %v", err)
		default:
			t.Fatal("no serving line")
		}
	}
	addr, _ := serving["address"].(string)
	addr = strings.Replace(addr, "[::]", "127.0.0.1", 1)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), waitFor)
	defer wcancel()
	w, err := nspv1.NewConfigurationManagerClient(conn).WatchVip(wctx, &nspv1.Vip{})
	require.NoError(t, err)
	r, err := w.Recv()
	require.NoError(t, err)
	require.Len(t, r.GetVips(), 1)
	assert.Equal(t, "20.0.0.1/32", r.GetVips()[0].GetAddress())

	writeFile(t, path, strings.Replace(yaml, "20.0.0.1/32", "bad", 1))
	writeFile(t, path, strings.Replace(yaml, "20.0.0.1/32", "20.0.0.2/32", 1))
	r, err = w.Recv()
	require.NoError(t, err)
	require.Len(t, r.GetVips(), 1)
	assert.Equal(t, "20.0.0.2/32", r.GetVips()[0].GetAddress())

	cancel()
	_, err = w.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}
}

func TestRunRefusesAnInvalidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	writeFile(t, path, strings.Replace(yaml, "20.0.0.1/32", "20.0.0.1", 1))
	err := Run(context.Background(), &Config{ConfigFile: path}, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "initial configuration")
	assert.Contains(t, err.Error(), `"20.0.0.1" is not a prefix`)
}
