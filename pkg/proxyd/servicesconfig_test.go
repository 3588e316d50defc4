package proxyd

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The services source's settings: the file stays the default, the
// kubernetes source needs the node and a proxy name that is a label
// value, refuses a services file beside it and bad prefixes, each error
// naming its variable; the proxy name defaults to conduit.trench.namespace.
func TestServicesSourceSettings(t *testing.T) {
	base := func() *Config {
		c, err := Load()
		require.NoError(t, err)
		c.Host, c.Conduit, c.Trench, c.Namespace = "node-a", "lb", "trench-a", "causeway"
		return c
	}
	c := base()
	require.Equal(t, ServicesFromFile, c.ServicesSource)
	require.False(t, c.ServicesOn())
	c.ServicesSource = ServicesFromKubernetes
	c.ServicePrefixes = " 10.96.0.0/16, fd00:96::/112 ,"
	require.NoError(t, c.Validate())
	require.True(t, c.ServicesOn())
	require.Equal(t, "lb.trench-a.causeway", c.ProxyName())
	p, err := c.ServicePrefixList()
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")}, p)

	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.ServicesSource = "api" }, `NSM_SERVICES_SOURCE: "api" is not "file" or "kubernetes"`},
		{func(c *Config) { c.ServicesSource, c.ServicesFile = ServicesFromKubernetes, "/etc/s.yaml" },
			"NSM_SERVICES_FILE: \"/etc/s.yaml\" is set while NSM_SERVICES_SOURCE=kubernetes"},
		{func(c *Config) { c.ServicesSource, c.Host = ServicesFromKubernetes, "" }, "NSM_HOST: the node name is needed"},
		{func(c *Config) { c.ServicesSource, c.Conduit = ServicesFromKubernetes, strings.Repeat("c", 60) },
			"NSM_SERVICES_PROXY_NAME: \"" + strings.Repeat("c", 60) + ".trench-a.causeway\" is not a label value"},
		{func(c *Config) { c.ServicesSource, c.ServicesProxyName = ServicesFromKubernetes, "bad name" }, "NSM_SERVICES_PROXY_NAME"},
		{func(c *Config) { c.ServicesSource, c.ServicePrefixes = ServicesFromKubernetes, "10.96.0.1/16" },
			`NSM_SERVICE_PREFIXES: "10.96.0.1/16" has host bits set`},
		{func(c *Config) { c.ServicesSource, c.ServicePrefixes = ServicesFromKubernetes, "0.0.0.0/0,x" },
			"NSM_SERVICE_PREFIXES: 0.0.0.0/0 is a default route"},
		{func(c *Config) { c.ServicePrefixes = "10.96.0.0/16" }, "NSM_SERVICE_PREFIXES: is for NSM_SERVICES_SOURCE=kubernetes"},
	} {
		c := base()
		tc.edit(c)
		err := c.Validate()
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
	}
}
