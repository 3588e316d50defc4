package authorize_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
)

// ids are the workloads of a path nsc → nsmgr → nse, a stranger, and the
// nsmgr's ID with a P-384 key.
type ids struct{ nsc, nsmgr, nse, other, nsmgr384 workload }

func newIDs(t testing.TB) ids {
	ca := testutil.NewSPIFFECA(t, "causeway.test")
	w := ids{nsc: newWorkload(t, ca, "/nsc"), nsmgr: newWorkload(t, ca, "/nsmgr"), nse: newWorkload(t, ca, "/nse"), other: newWorkload(t, ca, "/other")}
	w.nsmgr384 = newP384Workload(t, w.nsmgr)
	return w
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

// sdkOutcome is how the SDK's element ended a call: "passes", "refused"
// (PermissionDenied), "internal" (an evaluation error) or "panics".
func sdkOutcome(err error) string {
	switch {
	case err == nil:
		return "passes"
	case errors.Is(err, errSDKPanicked):
		return "panics"
	case status.Code(err) == codes.PermissionDenied:
		return "refused"
	case status.Code(err) == codes.Internal:
		return "internal"
	}
	return "error: " + err.Error()
}

var errSDKPanicked = errors.New("the SDK's element panicked")

// sdkCall runs call, turning a panic into errSDKPanicked.
func sdkCall(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errSDKPanicked, r)
		}
	}()
	return call()
}

// sdkDiff is the SDK's outcome of a case where it decides otherwise than
// ours, and why.
type sdkDiff struct{ outcome, why string }

// sdkDiffers are the cases where the SDK's Rego decides otherwise (see the
// package doc): where ours passes, the SDK fails with an error; where ours
// refuses, the SDK passes a token that its own token generator never makes,
// or panics.
var sdkDiffers = map[string]sdkDiff{
	"two audiences, the next subject among them": {"internal", "the Rego function yields true and false (eval_conflict_error)"},
	"an exp that is a string":                    {"passes", "Rego orders every string after every number"},
	"a content type that is not a string":        {"panics", "io.jwt.decode asserts that cty is a string"},
	"a nested token (content type JWT)":          {"passes", "io.jwt.decode reads the claims of the token in the payload"},
	"the previous token signed with a P-384 key": {"passes", "verify_es256 takes any ECDSA key and splits the signature in half"},
	"a signature with r and s zero-padded":       {"passes", "verify_es256 splits a signature of any length in half"},
	"an exp beyond float64":                      {"passes", "OPA decodes numbers with arbitrary precision"},
	"a numeric subject in a numeric audience":    {"passes", "the Rego compares any values"},
	"an audience that is an object":              {"passes", "Rego's aud[_] iterates an object's values"},
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
		{"tokens that carry their certificate (x5c)", func(w ids) *networkservice.Path {
			return path(2, w.nsc.chainToken(t, w.nsmgr.id, hour), w.nsmgr.chainToken(t, w.nse.id, hour), w.nse.chainToken(t, w.nsmgr.id, hour))
		}, fromNSMgr, ""},
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
		{"a signature padded with one =", replace(1, func(w ids) string { return w.nsmgr.token(t, w.nse.id, hour) + "=" }),
			fromNSMgr, "tokens_chained"},
		{"the first token's header with a stray =", replace(0, func(w ids) string {
			return editPart(w.nsc.token(t, w.nsmgr.id, hour), 0, func(h string) string { return h + "=" })
		}), fromNSMgr, "tokens_chained"},
		{"a line break in the first token's signature", replace(0, func(w ids) string {
			return editPart(w.nsc.token(t, w.nsmgr.id, hour), 2, func(s string) string { return s[:10] + "\n" + s[10:] })
		}), fromNSMgr, "tokens_chained"},
		{"four line breaks in a first token's part of four", replace(0, func(w ids) string {
			return editPart(w.nsc.token(t, w.nsmgr.id, hour), 0, func(h string) string {
				require.Zero(t, len(h)%4, "the header %q", h)
				return h[:4] + "\n\r\n\r" + h[4:]
			})
		}), fromNSMgr, ""},
		{"the previous token's alg is a number", replace(1, func(w ids) string {
			return jwt(t, `{"alg":5}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
		}), fromNSMgr, "prev_token_signed"},
		{"the previous token's kid is a number", replace(1, func(w ids) string {
			return jwt(t, `{"alg":"ES256","kid":1}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
		}), fromNSMgr, "prev_token_signed"},
		{"the previous token's typ is null", replace(1, func(w ids) string {
			return jwt(t, `{"alg":"ES256","typ":null}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
		}), fromNSMgr, "prev_token_signed"},
		{"the previous token's crit is empty", replace(1, func(w ids) string {
			return jwt(t, `{"alg":"ES256","crit":[]}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
		}), fromNSMgr, "prev_token_signed"},
		{"the previous token's crit starts with a number", replace(1, func(w ids) string {
			return jwt(t, `{"alg":"ES256","crit":[1,"b"],"b":0}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
		}), fromNSMgr, "prev_token_signed"},
		{"the previous token's crit names a header unknown to OPA", replace(1, func(w ids) string {
			return jwt(t, `{"alg":"ES256","crit":["b",1],"b":0}`, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
		}), fromNSMgr, ""},
		{"the first token's alg is a number (not verified)", replace(0, func(w ids) string {
			return jwt(t, `{"alg":5}`, map[string]any{"sub": w.nsc.id, "aud": []string{w.nsmgr.id}, "exp": hour.Unix()}, w.nsc.key)
		}), fromNSMgr, ""},
		{"the first token of content type JWT with a JSON payload", replace(0, func(w ids) string {
			return jwt(t, `{"alg":"ES256","cty":"JWT"}`, map[string]any{"sub": w.nsc.id, "aud": []string{w.nsmgr.id}, "exp": hour.Unix()}, w.nsc.key)
		}), fromNSMgr, "tokens_chained"},
		{"a content type that is not a string", replace(0, func(w ids) string {
			return jwt(t, `{"alg":"ES256","cty":1}`, map[string]any{"sub": w.nsc.id, "aud": []string{w.nsmgr.id}, "exp": hour.Unix()}, w.nsc.key)
		}), fromNSMgr, "tokens_chained"},
		{"a nested token (content type JWT)", replace(0, func(w ids) string {
			inner := w.nsc.token(t, w.nsmgr.id, hour)
			return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","cty":"JWT"}`)) + "." +
				base64.RawURLEncoding.EncodeToString([]byte(inner)) + ".c2ln"
		}), fromNSMgr, "tokens_chained"},
		{"the previous token signed with a P-384 key", replace(1, func(w ids) string { return w.nsmgr384.token(t, w.nse.id, hour) }),
			func(w ids) *peer.Peer { return tlsPeer(w.nsmgr384.cert) }, "prev_token_signed"},
		{"a signature with r and s zero-padded", replace(1, func(w ids) string {
			return jwtSigned(t, es256Header, map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key, 33)
		}), fromNSMgr, "prev_token_signed"},
		{"an exp beyond float64", replace(0, func(w ids) string {
			return jwt(t, es256Header, map[string]any{"sub": w.nsc.id, "aud": []string{w.nsmgr.id}, "exp": json.Number("1e400")}, w.nsc.key)
		}), fromNSMgr, "tokens_chained"},
		{"a numeric subject in a numeric audience", func(w ids) *networkservice.Path {
			toks := good(w)
			toks[0] = jwt(t, es256Header, map[string]any{"sub": w.nsc.id, "aud": []any{7}, "exp": hour.Unix()}, w.nsc.key)
			toks[1] = jwt(t, es256Header, map[string]any{"sub": 7, "aud": []string{w.nse.id}, "exp": hour.Unix()}, w.nsmgr.key)
			return path(2, toks...)
		}, fromNSMgr, "tokens_chained"},
		{"an audience that is an object", replace(0, func(w ids) string {
			return jwt(t, es256Header, map[string]any{"sub": w.nsc.id, "aud": map[string]any{"x": w.nsmgr.id}, "exp": hour.Unix()}, w.nsc.key)
		}), fromNSMgr, "tokens_chained"},
	}
}

// TestServerDecidesAsTheSDK: the server refuses and passes the Requests and
// Closes that the SDK's authorize server with its default Rego policies
// does, naming the policy.
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
			_, err = ours.Close(ctx, req.GetConnection().Clone())
			require.Equal(t, tc.want, decision(err), "ours, Close: %v", err)
			sdkErr := sdkCall(func() error { _, err := sdk.Request(ctx, req.Clone()); return err })
			sdkCloseErr := sdkCall(func() error { _, err := sdk.Close(ctx, req.GetConnection().Clone()); return err })
			require.Equal(t, sdkOutcome(sdkErr), sdkOutcome(sdkCloseErr), "the SDK's Close: %v", sdkCloseErr)
			want := "passes"
			if tc.want != "" {
				want = "refused"
			}
			if diff, ok := sdkDiffers[tc.name]; ok {
				require.NotEqual(t, want, diff.outcome)
				want = diff.outcome
				t.Logf("the SDK %s: %s", want, diff.why)
			}
			require.Equal(t, want, sdkOutcome(sdkErr), "the SDK: %v", sdkErr)
		})
	}
}
