package daemon

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
