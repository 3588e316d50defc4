package grpcsecurity

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/causeway-net/causeway/internal/testutil"
)

func securityConfig(insecure bool, ids ...string) SecurityConfig {
	return SecurityConfig{EnvPrefix: "SVC", Insecure: insecure, Plaintext: "the svc server", AuthorizedIDs: ids}
}

func TestOpenSecurityPlainTextIsWarned(t *testing.T) {
	var out testutil.SyncBuffer
	sec, closeSec, err := OpenSecurity(t.Context(), securityConfig(true), slog.New(slog.NewJSONHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	closeSec()
	if len(sec.ServerOptions) != 1 || sec.Client == nil || sec.Client.Info().SecurityProtocol != "insecure" {
		t.Fatalf("plain text: %d server options, client %v", len(sec.ServerOptions), sec.Client)
	}
	if !strings.Contains(out.String(), `"setting":"SVC_INSECURE"`) {
		t.Fatalf("no plain-text warning naming the setting: %s", out.String())
	}
}

func TestOpenSecurityErrorsNameTheSetting(t *testing.T) {
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", "")
	logger := slog.New(slog.DiscardHandler)
	if _, _, err := OpenSecurity(t.Context(), securityConfig(false), logger); err == nil || !strings.Contains(err.Error(), "SVC_INSECURE=true") {
		t.Fatalf("without SPIFFE: %v", err)
	}
	if _, _, err := OpenSecurity(t.Context(), securityConfig(true, "not-an-id"), logger); err == nil || !strings.HasPrefix(err.Error(), "SVC_AUTHORIZED_IDS: ") {
		t.Fatalf("bad ID: %v", err)
	}
}

func TestSecurityConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  SecurityConfig
		want string
	}{
		{securityConfig(false, "spiffe://example.org/proxy"), ""},
		{securityConfig(false, "not-an-id"), "SVC_AUTHORIZED_IDS: "},
		{securityConfig(true, "spiffe://example.org/proxy"), "SVC_AUTHORIZED_IDS: callers cannot be authorized by SPIFFE ID with SVC_INSECURE=true"},
		{securityConfig(true), ""},
	} {
		err := tc.cfg.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
