package envload_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/envload"
)

type spec struct {
	DialTimeout time.Duration `default:"5s" split_words:"true"`
	Port        int           `default:"7778"`
	MTU         uint16        `default:"1500" envconfig:"MTU"`
	Insecure    bool          `default:"false"`
	ConnectTo   url.URL       `default:"unix:///x.sock" split_words:"true"`
	Names       []string      `envconfig:"NAMES"`
}

func TestEveryBadValueIsNamed(t *testing.T) {
	t.Setenv("SVC_DIAL_TIMEOUT", "5")
	t.Setenv("SVC_PORT", "seventy")
	t.Setenv("SVC_MTU", "70000")
	t.Setenv("SVC_INSECURE", "yes please")
	t.Setenv("SVC_CONNECT_TO", "unix://%zz")
	var s spec
	err := envload.Process("svc", &s)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 5, "one line per bad variable: %v", err)
	require.Equal(t, `SVC_DIAL_TIMEOUT="5": not a duration (such as 500ms, 30s, 5m, 24h)`, lines[0])
	require.Equal(t, `SVC_PORT="seventy": not an integer`, lines[1])
	require.Equal(t, `SVC_MTU="70000": not an integer in range of uint16`, lines[2])
	require.Equal(t, `SVC_INSECURE="yes please": not a boolean (true or false)`, lines[3])
	require.True(t, strings.HasPrefix(lines[4], `SVC_CONNECT_TO="unix://%zz": not a valid url.URL (`), lines[4])
}

func TestGoodValuesAndDefaults(t *testing.T) {
	t.Setenv("SVC_PORT", "80")
	t.Setenv("SVC_NAMES", "a,b")
	var s spec
	require.NoError(t, envload.Process("svc", &s))
	require.Equal(t, spec{DialTimeout: 5 * time.Second, Port: 80, MTU: 1500, ConnectTo: url.URL{Scheme: "unix", Path: "/x.sock"}, Names: []string{"a", "b"}}, s)
}

func TestNotAStructPointer(t *testing.T) {
	var s spec
	require.ErrorContains(t, envload.Process("svc", s), "not a pointer to a struct")
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLogValue(t *testing.T) {
	s := spec{DialTimeout: 5 * time.Second, Port: 80, MTU: 1500, ConnectTo: url.URL{Scheme: "unix", Path: "/x.sock"}, Names: []string{"a"}}
	got := map[string]any{}
	for _, a := range envload.LogValue(&s).Group() {
		got[a.Key] = a.Value.Any()
	}
	require.Equal(t, map[string]any{
		"dialTimeout": "5s", "port": int64(80), "mtu": uint64(1500), "insecure": false,
		"connectTo": "unix:///x.sock", "names": []string{"a"},
	}, got)
}
