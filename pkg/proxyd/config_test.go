package proxyd

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

func setenv(t *testing.T, kv map[string]string) {
	t.Helper()
	for k, v := range kv {
		t.Setenv(k, v)
	}
}

func TestLoadDefaultsMatchMeridio(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatalf("Load with an empty environment: %v", err)
	}
	checks := map[string][2]any{
		"Name":                  {c.Name, "proxy"},
		"ServiceName":           {c.ServiceName, "proxy"},
		"ConnectTo":             {c.ConnectTo.String(), "unix:///var/lib/networkservicemesh/nsm.io.sock"},
		"DialTimeout":           {c.DialTimeout, 5 * time.Second},
		"RequestTimeout":        {c.RequestTimeout, 15 * time.Second},
		"MaxTokenLifetime":      {c.MaxTokenLifetime, 24 * time.Hour},
		"IPAMService":           {c.IPAMService, "ipam-service:7777"},
		"NetworkServiceName":    {c.NetworkServiceName, "load-balancer"},
		"Trench":                {c.Trench, "default"},
		"Conduit":               {c.Conduit, "load-balancer"},
		"NSPAddress":            {c.NSPAddress(), "nsp-service-default.default:7778"},
		"IPFamily":              {c.IPFamily, "dualstack"},
		"LogLevel":              {c.LogLevel, "DEBUG"},
		"MTU":                   {c.MTU, 1500},
		"GRPCMaxBackoff":        {c.GRPCMaxBackoff, 5 * time.Second},
		"IPReleaseDelay":        {c.IPReleaseDelay, 20 * time.Second},
		"BridgeIPRenewInterval": {c.BridgeIPRenewInterval, 5 * time.Minute},
		"Table":                 {c.Table, 1},
		"BridgeName":            {c.BridgeName, "bridge0"},
	}
	for name, gw := range checks {
		if gw[0] != gw[1] {
			t.Errorf("%s = %v, want %v", name, gw[0], gw[1])
		}
	}
	if f := c.Families(); len(f) != 2 || f[0] != IPv4 || f[1] != IPv6 {
		t.Errorf("Families = %v", f)
	}
}

func TestLoadReadsMeridioNames(t *testing.T) {
	setenv(t, map[string]string{
		"NSM_NAME": "proxy-a", "NSM_SERVICE_NAME": "proxy.c.t.ns", "NSM_CONNECT_TO": "unix:///run/nsm.sock",
		"NSM_IPAM_SERVICE": "ipam:1", "NSM_HOST": "worker-1", "NSM_NETWORK_SERVICE_NAME": "c.t.ns",
		"NSM_NAMESPACE": "ns", "NSM_TRENCH": "t", "NSM_CONDUIT": "c", "NSM_NSP_SERVICE_NAME": "nsp",
		"NSM_NSP_SERVICE_PORT": "1234", "NSM_IP_FAMILY": "IPv6", "NSM_MTU": "9000", "NSM_IP_RELEASE_DELAY": "3s",
		"NSM_BRIDGE_IP_RENEW_INTERVAL": "1m", "NSM_MAX_TOKEN_LIFETIME": "10m", "NSM_LOG_LEVEL": "trace",
	})
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "proxy-a" || c.ServiceName != "proxy.c.t.ns" || c.ConnectTo.Path != "/run/nsm.sock" ||
		c.IPAMService != "ipam:1" || c.Host != "worker-1" || c.NetworkServiceName != "c.t.ns" ||
		c.NSPAddress() != "nsp-t.ns:1234" || c.MTU != 9000 || c.IPReleaseDelay != 3*time.Second ||
		c.BridgeIPRenewInterval != time.Minute || c.MaxTokenLifetime != 10*time.Minute {
		t.Fatalf("unexpected config %+v", c)
	}
	if f := c.Families(); len(f) != 1 || f[0] != IPv6 {
		t.Fatalf("Families = %v", f)
	}
}

func TestValidateNamesEveryBadVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"NSM_MTU":                   {"NSM_MTU": "1000"}, // dualstack needs 1280
		"NSM_CONNECT_TO":            {"NSM_CONNECT_TO": "http://x"},
		"NSM_TRENCH":                {"NSM_TRENCH": " "},
		"NSM_LOG_LEVEL":             {"NSM_LOG_LEVEL": "loud"},
		"NSM_TABLE":                 {"NSM_TABLE": "254"},
		"NSM_REQUEST_TIMEOUT":       {"NSM_REQUEST_TIMEOUT": "0s"},
		"NSM_BRIDGE_NAME":           {"NSM_BRIDGE_NAME": "a-name-that-is-too-long"},
		"NSM_MAX_TOKEN_LIFETIME":    {"NSM_MAX_TOKEN_LIFETIME": "20s"}, // the request timeout is 15 s
		"NSM_NEXTHOP_CHECK_*":       {"NSM_NEXTHOP_CHECK_INTERVAL": "1ms"},
		"NSM_TARGET_CHECK_INTERVAL": {"NSM_TARGET_CHECK_INTERVAL": "1ms"},
		"NSM_METRICS_ADDRESS":       {"NSM_METRICS_ADDRESS": "9091"},
	}
	for want, env := range cases {
		t.Run(want, func(t *testing.T) {
			setenv(t, env)
			_, err := Load()
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Load() error = %v, want one naming %s", err, want)
			}
		})
	}
	t.Run("the MTU error names the family served", func(t *testing.T) {
		setenv(t, map[string]string{"NSM_MTU": "1000", "NSM_IP_FAMILY": "ipv5"})
		_, err := Load()
		want := `NSM_MTU: 1000 is out of range [1280, 65535] for dual-stack (NSM_IP_FAMILY="ipv5" is not ipv4, ipv6 or dualstack)`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error = %v, want one with %s", err, want)
		}
	})
	t.Run("ipv4 allows a small MTU", func(t *testing.T) {
		setenv(t, map[string]string{"NSM_MTU": "1000", "NSM_IP_FAMILY": "ipv4"})
		if _, err := Load(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a token lifetime twice the request timeout is enough", func(t *testing.T) {
		setenv(t, map[string]string{"NSM_MAX_TOKEN_LIFETIME": "10s", "NSM_REQUEST_TIMEOUT": "5s"})
		if _, err := Load(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unparsable duration", func(t *testing.T) {
		setenv(t, map[string]string{"NSM_DIAL_TIMEOUT": "soon"})
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), "DIAL_TIMEOUT") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("every unparsable value", func(t *testing.T) {
		setenv(t, map[string]string{"NSM_DIAL_TIMEOUT": "soon", "NSM_MTU": "big", "NSM_INSECURE": "maybe"})
		_, err := Load()
		want := "cannot read the NSM_* environment:\n" +
			`NSM_DIAL_TIMEOUT="soon": not a duration (such as 500ms, 30s, 5m, 24h)` + "\n" +
			`NSM_MTU="big": not an integer` + "\n" +
			`NSM_INSECURE="maybe": not a boolean (true or false)`
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v, want %q", err, want)
		}
	})
}

// The datapath checks' settings: the nexthops' on by default, the
// targets' off until given an interval, both off with the off switch.
func TestCheckSettings(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if s := c.NexthopCheck(); s.Off || s.Interval != 50*time.Millisecond || s.FailuresBeforeDown != 8 || s.SuccessesBeforeUp != 5 || s.HoldDown != time.Second {
		t.Fatalf("nexthop check settings %+v", s)
	}
	if _, on := c.TargetCheck(); on {
		t.Fatal("the target check is on by default")
	}
	c.TargetCheckInterval = time.Second
	if s, on := c.TargetCheck(); !on || s.Interval != time.Second || s.FailuresBeforeDown != 8 {
		t.Fatalf("target check %+v, on %t", s, on)
	}
	c.NexthopCheckOff = true
	if _, on := c.TargetCheck(); on || !c.NexthopCheck().Off {
		t.Fatal("the off switch leaves a check on")
	}
}

// TestLogValueReadsAsText: the "starting" line shows durations and the
// NSMgr URL as an operator writes them (it showed nanoseconds and the
// fields of a url.URL).
func TestLogValueReadsAsText(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("starting", "config", c)
	for _, want := range []string{`"dialTimeout":"5s"`, `"connectTo":"unix:///var/lib/networkservicemesh/nsm.io.sock"`, `"ipamService":"ipam-service:7777"`, `"mtu":1500`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s lacks %s", b.String(), want)
		}
	}
}

// The metrics' port is the one the Dataplane guards from the bridge: none
// with the metrics off or on a port the kernel picks.
func TestMetricsPort(t *testing.T) {
	for addr, want := range map[string]uint16{"": 0, ":9091": 9091, "10.0.0.1:8080": 8080, "[fd00::1]:9100": 9100, ":0": 0} {
		c := Config{MetricsAddress: addr}
		got, err := c.MetricsPort()
		if err != nil || got != want {
			t.Errorf("MetricsPort(%q) = %d, %v; want %d", addr, got, err, want)
		}
	}
	for _, addr := range []string{"9091", ":http", ":65536", "fd00::1:9091"} {
		c := Config{MetricsAddress: addr}
		if _, err := c.MetricsPort(); err == nil || !strings.Contains(err.Error(), strconv.Quote(addr)) {
			t.Errorf("MetricsPort(%q) error = %v, want one naming the address", addr, err)
		}
	}
}
