package nspd

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/nspd/nspserver"
)

func TestMetricsExposition(t *testing.T) {
	nsp := nspserver.New(slog.New(slog.DiscardHandler))
	defer nsp.Close()
	m := newMetrics(nsp)
	m.applied.Inc()
	m.applied.Inc()
	m.rejected.Inc()

	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	assert.Contains(t, body, `causeway_nsp_config_reloads_total{result="applied"} 2`)
	assert.Contains(t, body, `causeway_nsp_config_reloads_total{result="rejected"} 1`)
	assert.Contains(t, body, `causeway_nsp_watch_streams{kind="vip"} 0`)
	assert.Contains(t, body, `causeway_nsp_watch_streams{kind="conduit"} 0`)
	assert.Contains(t, body, "go_goroutines")
}
