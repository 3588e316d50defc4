package nspd

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunNeedsSPIFFEOrAnExplicitInsecure: without SPIFFE_ENDPOINT_SOCKET,
// Run refuses to serve plain gRPC unless NSP_INSECURE asks for it.
func TestRunNeedsSPIFFEOrAnExplicitInsecure(t *testing.T) {
	t.Setenv("SPIFFE_ENDPOINT_SOCKET", "")
	path := filepath.Join(t.TempDir(), "nsp.yaml")
	writeFile(t, path, yaml)
	err := Run(context.Background(), &Config{ConfigFile: path}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "NSP_INSECURE=true")
}

func TestValidateAuthorizedIDs(t *testing.T) {
	c := &Config{LogLevel: "INFO", AuthorizedIDs: []string{"proxy"}}
	require.ErrorContains(t, c.Validate(), "NSP_AUTHORIZED_IDS")
	c.AuthorizedIDs = []string{"spiffe://td/proxy"}
	require.NoError(t, c.Validate())
	c.Insecure = true
	require.ErrorContains(t, c.Validate(), "NSP_INSECURE=true")
}
