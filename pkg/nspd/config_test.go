package nspd

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadDefaults(t *testing.T) {
	c, err := Load()
	require.NoError(t, err)
	assert.Equal(t, Config{
		Port: 7778, ConfigFile: "/etc/causeway/nsp.yaml", ConfigPollInterval: 10 * time.Second,
		LogLevel: "DEBUG", MetricsPort: 0, GracePeriod: 5 * time.Second,
	}, *c)
}

func TestLoadNamesTheVariable(t *testing.T) {
	t.Setenv("NSP_LOG_LEVEL", "loud")
	_, err := Load()
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "NSP_LOG_LEVEL: "), err.Error())

	t.Setenv("NSP_LOG_LEVEL", "info")
	t.Setenv("NSP_GRACE_PERIOD", "soon")
	t.Setenv("NSP_PORT", "port")
	_, err = Load()
	require.Error(t, err)
	assert.Equal(t, "cannot read the NSP_* environment:\n"+
		`NSP_PORT="port": not an integer`+"\n"+
		`NSP_GRACE_PERIOD="soon": not a duration (such as 500ms, 30s, 5m, 24h)`, err.Error(),
		"every value that does not parse is named")
}

func TestValidateNamesEveryBadVariable(t *testing.T) {
	setenvs(t, map[string]string{"NSP_PORT": "70000", "NSP_HEALTH_PORT": "-1", "NSP_CONFIG_POLL_INTERVAL": "0s", "NSP_GRACE_PERIOD": "-1s", "NSP_CONFIG_FILE": ""})
	_, err := Load()
	require.Error(t, err)
	for _, want := range []string{"NSP_PORT: 70000 is not a port", "NSP_HEALTH_PORT: -1", "NSP_CONFIG_POLL_INTERVAL: 0s must be above 0", "NSP_GRACE_PERIOD: -1s must not be negative", "NSP_CONFIG_FILE: empty"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Len(t, strings.Split(err.Error(), "\n"), 5, "one line per problem: %v", err)
}

func setenvs(t *testing.T, kv map[string]string) {
	t.Helper()
	for k, v := range kv {
		t.Setenv(k, v)
	}
}
