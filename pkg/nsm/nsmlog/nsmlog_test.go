package nsmlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	regchain "github.com/networkservicemesh/sdk/pkg/registry/core/chain"
	sdklog "github.com/networkservicemesh/sdk/pkg/tools/log"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/internal/logging"
)

func TestBridgeLevelsAndFields(t *testing.T) {
	var buf bytes.Buffer
	base, _ := logging.New(&buf, "proxy", slog.LevelDebug)
	l := New(base)
	l.WithField("conn", "c1").Infof("request %d", 7)
	l.Trace("not shown at debug level")
	l.Errorf("boom: %s", "x")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d: %q", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first["msg"] != "request 7" || first["conn"] != "c1" || first["level"] != "INFO" || first["source"] != "nsm" {
		t.Errorf("first line %v", first)
	}
	if second["msg"] != "boom: x" || second["level"] != "ERROR" {
		t.Errorf("second line %v", second)
	}
}

// An SDK registry chain called with WithContext's context logs through
// our logger, not through the plain-text logger its trace elements put in
// place of the global one; the retry element's line for each failed try is
// a trace line.
func TestRegistryChainKeepsTheContextLogger(t *testing.T) {
	var buf bytes.Buffer
	base, _ := logging.New(&buf, "proxy", logging.LevelTrace)
	prev := sdklog.L()
	Install(base)
	defer sdklog.SetGlobalLogger(prev)
	logrus.SetOutput(io.Discard) // where the plain-text lines go
	defer logrus.SetOutput(os.Stderr)
	for _, tc := range []struct {
		ctx  context.Context
		ours bool
	}{{context.Background(), false}, {WithContext(context.Background(), base), true}} {
		buf.Reset()
		_, _ = regchain.NewNetworkServiceEndpointRegistryClient(loggerProbe{}).Find(tc.ctx, &registryapi.NetworkServiceEndpointQuery{})
		if got := strings.Contains(buf.String(), `"level":"TRACE","msg":"try attempt has failed"`); got != tc.ours {
			t.Errorf("with WithContext %v: our log has the line: %v (%q)", tc.ours, got, buf.String())
		}
	}
}

// loggerProbe is a registry client whose Find logs an error through its
// context's logger, as the SDK's retry element does.
type loggerProbe struct{}

func (loggerProbe) Register(_ context.Context, nse *registryapi.NetworkServiceEndpoint, _ ...grpc.CallOption) (*registryapi.NetworkServiceEndpoint, error) {
	return nse, nil
}

func (loggerProbe) Find(ctx context.Context, _ *registryapi.NetworkServiceEndpointQuery, _ ...grpc.CallOption) (registryapi.NetworkServiceEndpointRegistry_FindClient, error) {
	sdklog.FromContext(ctx).Errorf("try attempt has failed")
	return nil, errors.New("probe")
}

func (loggerProbe) Unregister(context.Context, *registryapi.NetworkServiceEndpoint, ...grpc.CallOption) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}
