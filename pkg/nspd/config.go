// Package nspd assembles the configuration server daemon: its NSP_*
// configuration and the start/stop order of the configuration file watch,
// the nsp.v1.ConfigurationManager and health gRPC server, and the metrics
// server. cmd/nsp only calls Load and Run. Its parts are the sub-packages
// configfile (the file's model, parsing and watch) and nspserver (the gRPC
// service over the configuration in force).
package nspd

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/internal/envload"
	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/pkg/grpcsecurity"
)

// Config is read from NSP_* environment variables.
type Config struct {
	Port               int           `default:"7778" desc:"gRPC port of 'nsp.v1.ConfigurationManager' and 'grpc.health.v1'"`
	ConfigFile         string        `default:"/etc/causeway/nsp.yaml" split_words:"true" desc:"YAML file of trenches, conduits and VIPs"`
	ConfigPollInterval time.Duration `default:"10s" split_words:"true" desc:"re-read period backing up file notifications"`
	LogLevel           string        `default:"DEBUG" split_words:"true" desc:"log level"`
	MetricsPort        int           `default:"0" split_words:"true" desc:"Prometheus '/metrics'; 0 turns it off"`
	GracePeriod        time.Duration `default:"5s" split_words:"true" desc:"how long a stop waits for calls in flight"`
	HealthPort         int           `default:"0" split_words:"true" desc:"port of a plain-text 'grpc.health.v1' alone, for the kubelet's gRPC probes (they speak no TLS); 0: none"`
	Insecure           bool          `default:"false" envconfig:"INSECURE" desc:"plain gRPC, asked for explicitly, for local use only (warned at start and hourly); otherwise SPIFFE mTLS from 'SPIFFE_ENDPOINT_SOCKET', which must be set"`
	AuthorizedIDs      []string      `envconfig:"AUTHORIZED_IDS" desc:"comma-separated rules of the callers allowed (the trench's proxies and IPAM): SPIFFE IDs, or paths in the server's own trust domain (/ns/<ns>/sa/<account>); path.Match wildcards within a segment (/ns/<ns>/pod/<name>-?????); others get PermissionDenied, logged with the rules they missed; empty: any SVID the trust bundle verifies"`
}

// EnvPrefix is the prefix of every configuration server environment
// variable.
const EnvPrefix = "nsp"

// Load reads the configuration from the environment and validates it. The
// error names the variable and is meant to follow "nsp: " on the daemon's
// standard error.
func Load() (*Config, error) {
	var c Config
	if err := envload.Process(EnvPrefix, &c); err != nil {
		return nil, fmt.Errorf("cannot read the NSP_* environment:\n%w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the configuration and returns every problem found, one
// per line, each naming its environment variable.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		bad("NSP_LOG_LEVEL: %w", err)
	}
	if err := daemon.CheckPorts(map[string]int{"NSP_PORT": c.Port, "NSP_METRICS_PORT": c.MetricsPort, "NSP_HEALTH_PORT": c.HealthPort}); err != nil {
		errs = append(errs, err)
	}
	if c.ConfigFile == "" {
		bad("NSP_CONFIG_FILE: empty")
	}
	if c.ConfigPollInterval <= 0 {
		bad("NSP_CONFIG_POLL_INTERVAL: %v must be above 0", c.ConfigPollInterval)
	}
	if c.GracePeriod < 0 {
		bad("NSP_GRACE_PERIOD: %v must not be negative", c.GracePeriod)
	}
	if err := c.security().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// security is the transport security the configuration asks for.
func (c *Config) security() grpcsecurity.SecurityConfig {
	return grpcsecurity.SecurityConfig{
		EnvPrefix: "NSP", Insecure: c.Insecure, Plaintext: "the configuration server", AuthorizedIDs: c.AuthorizedIDs,
	}
}

// LogValue renders the configuration in a log line, durations as text.
func (c Config) LogValue() slog.Value { return envload.LogValue(&c) }
