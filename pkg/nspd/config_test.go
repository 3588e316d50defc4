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
	_, err = Load()
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "configuration: "), err.Error())
	assert.Contains(t, err.Error(), "NSP_GRACE_PERIOD")
}
