package authorize_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	sdkauthorize "github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/authorize"
)

// ids are the workloads of a path nsc → nsmgr → nse, and a stranger.
type ids struct{ nsc, nsmgr, nse, other workload }

func newIDs(t *testing.T) ids {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	return ids{newWorkload(t, ca, "/nsc"), newWorkload(t, ca, "/nsmgr"), newWorkload(t, ca, "/nse"), newWorkload(t, ca, "/other")}
}

// decision is a Request's outcome: "" when it passed, else the policy that
// refused it (ours), or "refused" (the SDK's, whose error names none).
func decision(err error) string {
	if err == nil {
		return ""
	}
	if strings.Contains(err.Error(), "no sufficient privileges") {
		return "refused"
	}
	if status.Code(err) != codes.PermissionDenied {
		return "error: " + err.Error()
	}
	if i := strings.Index(err.Error(), "authorization policy "); i >= 0 {
		return strings.TrimSuffix(strings.Fields(err.Error()[i+len("authorization policy "):])[0], ":")
	}
	return "other: " + err.Error()
}

type serverCase struct {
	name string
	path func(ids) *networkservice.Path
	peer func(ids) *peer.Peer
	want string // the policy that refuses, "" to pass
}

// sdkDiffers are the cases where the SDK's Rego decides otherwise, and why
// (see the package doc).
var sdkDiffers = map[string]string{
	"two audiences, the next subject among them": "Internal: the Rego function yields true and false (eval_conflict_error)",
	"an exp that is a string":                    "passes: Rego orders every string after every number",
}

func serverCases(t *testing.T) []serverCase {
	hour := time.Now().Add(time.Hour)
	good := func(w ids) []string {
		return []string{w.nsc.token(t, w.nsmgr.id, hour), w.nsmgr.token(t, w.nse.id, hour), w.nse.token(t, w.nsmgr.id, hour)}
	}
	fromNSMgr := func(w ids) *peer.Peer { return tlsPeer(w.nsmgr.cert) }
	replace := func(i int, tok func(ids) string) func(ids) *networkservice.Path {
		return func(w ids) *networkservice.Path {
			toks := good(w)
			toks[i] = tok(w)
			return path(2, toks...)
		}
	}
	return []serverCase{
		{"a chain signed by the caller", func(w ids) *networkservice.Path { return path(2, good(w)...) }, fromNSMgr, ""},
		{"two segments", func(w ids) *networkservice.Path {
			return path(1, w.nsmgr.token(t, w.nse.id, hour), w.nse.token(t, w.nsmgr.id, hour))
		}, fromNSMgr, ""},
		{"the previous token signed by a stranger", func(w ids) *networkservice.Path { return path(2, good(w)...) },
			func(w ids) *peer.Peer { return tlsPeer(w.other.cert) }, "prev_token_signed"},
		{"no TLS certificate", func(w ids) *networkservice.Path { return path(2, good(w)...) },
			func(ids) *peer.Peer { return tlsPeer(nil) }, "prev_token_signed"},
		{"an unsigned previous token", replace(1, func(w ids) string {
			return jwt(t, `{"alg":"none"}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, nil)
		}), fromNSMgr, "prev_token_signed"},
		{"the previous token's header names another algorithm", replace(1, func(w ids) string {
			return jwt(t, `{"alg":"HS256"}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
		}), fromNSMgr, ""},
		{"the first token expired", replace(0, func(w ids) string { return w.nsc.token(t, w.nsmgr.id, time.Now().Add(-time.Minute)) }),
			fromNSMgr, "tokens_expired"},
		{"a token without exp", replace(0, func(w ids) string {
			return jwt(t, es256Header, map[string]any{"sub": w.nsc.id, "aud": []string{w.nsmgr.id}}, w.nsc.key)
		}), fromNSMgr, "tokens_expired"},
		{"an exp that is a string", replace(0, func(w ids) string {
			return jwt(t, es256Header, map[string]any{"sub": w.nsc.id, "aud": []string{w.nsmgr.id}, "exp": "soon"}, w.nsc.key)
		}), fromNSMgr, "tokens_expired"},
		{"a payload that is a list", replace(0, func(w ids) string {
			return base64.RawURLEncoding.EncodeToString([]byte(es256Header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`["x"]`)) + ".c2ln"
		}), fromNSMgr, "tokens_chained"},
		{"the chain broken", replace(0, func(w ids) string { return w.nsc.token(t, w.other.id, hour) }), fromNSMgr, "tokens_chained"},
		{"an audience that is a string", replace(0, func(w ids) string {
			return jwt(t, es256Header, map[string]any{"sub": w.nsc.id, "aud": w.nsmgr.id, "exp": hour.Unix()}, w.nsc.key)
		}), fromNSMgr, "tokens_chained"},
		{"two audiences, the next subject among them", replace(0, func(w ids) string {
			return jwt(t, es256Header, map[string]any{"sub": w.nsc.id, "aud": []string{w.other.id, w.nsmgr.id}, "exp": hour.Unix()}, w.nsc.key)
		}), fromNSMgr, ""},
		{"an opaque token", replace(0, func(ids) string { return "opaque" }), fromNSMgr, "tokens_chained"},
		{"a header that is not JSON", replace(0, func(w ids) string {
			return jwt(t, `not json`, map[string]any{"sub": w.nsc.id, "aud": []string{w.nsmgr.id}, "exp": hour.Unix()}, w.nsc.key)
		}), fromNSMgr, "tokens_chained"},
		{"an empty first token", replace(0, func(ids) string { return "" }), fromNSMgr, "tokens_chained"},
		{"a padded signature", replace(1, func(w ids) string { return w.nsmgr.token(t, w.nse.id, hour) + "==" }), fromNSMgr, ""},
	}
}

// TestServerDecidesAsTheSDK: the server refuses and passes what the SDK's
// authorize server with its default Rego policies does, naming the policy.
func TestServerDecidesAsTheSDK(t *testing.T) {
	w := newIDs(t)
	ours := authorize.NewServer()
	sdk := sdkauthorize.NewServer()
	for _, tc := range serverCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			req := &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c", Path: tc.path(w)}}
			ctx := peer.NewContext(context.Background(), tc.peer(w))
			_, err := ours.Request(ctx, req.Clone())
			require.Equal(t, tc.want, decision(err), "ours: %v", err)
			_, sdkErr := sdk.Request(ctx, req.Clone())
			want := ""
			if tc.want != "" {
				want = "refused"
			}
			if why, ok := sdkDiffers[tc.name]; ok {
				require.NotEqual(t, want, decision(sdkErr), "the SDK: %s", why)
				return
			}
			require.Equal(t, want, decision(sdkErr), "the SDK: %v", sdkErr)
		})
	}
}
