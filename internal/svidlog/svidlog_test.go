package svidlog

import (
	"crypto/x509"
	"errors"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource hands out the SVID of the serial it is set to.
type fakeSource struct {
	mu      sync.Mutex
	serial  int64
	updated chan struct{}
}

func (f *fakeSource) GetX509SVID() (*x509svid.SVID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.serial == 0 {
		return nil, errors.New("no SVID yet")
	}
	return &x509svid.SVID{
		ID:           spiffeid.RequireFromString("spiffe://k8s.nsm/ns/causeway/pod/proxy-a-b-x1y2z"),
		Certificates: []*x509.Certificate{{SerialNumber: big.NewInt(f.serial), NotAfter: time.Unix(1e9, 0).UTC()}},
	}, nil
}

func (f *fakeSource) Updated() <-chan struct{} { return f.updated }

func (f *fakeSource) set(serial int64) {
	f.mu.Lock()
	f.serial = serial
	f.mu.Unlock()
	f.updated <- struct{}{}
}

// lines are the lines logged to out so far.
func lines(out *testutil.SyncBuffer) []string {
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// waitLines waits until n lines are logged to out (a minute guards against
// never).
func waitLines(t *testing.T, out *testutil.SyncBuffer, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(lines(out)) >= n }, time.Minute, time.Millisecond)
}

// The first SVID and each renewal are logged once; an update that brings
// no new SVID (a bundle change) is not.
func TestLogsFirstSVIDAndRenewals(t *testing.T) {
	src := &fakeSource{updated: make(chan struct{})}
	var out testutil.SyncBuffer
	stop := Start(src, slog.New(slog.NewTextHandler(&out, nil)))
	src.set(7)
	waitLines(t, &out, 1)
	src.set(7) // a bundle update: same SVID
	src.set(8)
	waitLines(t, &out, 2)
	src.set(9)
	waitLines(t, &out, 3)
	stop()
	got := lines(&out)
	require.Len(t, got, 3, "%q", got)
	assert.Contains(t, got[0], `msg="SPIFFE SVID" spiffe_id=spiffe://k8s.nsm/ns/causeway/pod/proxy-a-b-x1y2z serial=7 not_after=2001-09-09T01:46:40.000Z`)
	assert.Contains(t, got[1], `msg="SPIFFE SVID renewed"`)
	assert.Contains(t, got[1], "serial=8")
	assert.Contains(t, got[2], "serial=9")
}
