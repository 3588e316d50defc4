package nspwatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseVIP(t *testing.T) {
	for in, want := range map[string]string{
		"20.0.0.1/32":     "20.0.0.1/32",
		"20.0.0.1":        "20.0.0.1/32",
		"40.0.0.1/24":     "40.0.0.0/24",
		"2001:db8::1":     "2001:db8::1/128",
		"2001:db8:0::/64": "2001:db8::/64",
	} {
		p, err := ParseVIP(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, p.String(), in)
	}
	for _, in := range []string{"", "20.0.0.1/33", "x", "fe80::1%eth0", "20.0.0/24"} {
		_, err := ParseVIP(in)
		assert.Error(t, err, in)
	}
}
