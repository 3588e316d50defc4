// Package nspd assembles the configuration server daemon: its NSP_*
// configuration and the start/stop order of the configuration file watch,
// the nsp.v1.ConfigurationManager and health gRPC server, and the metrics
// server. cmd/nsp only calls Load and Run.
package nspd

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/internal/logging"
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
	AuthorizedIDs      []string      `envconfig:"AUTHORIZED_IDS" desc:"comma-separated SPIFFE IDs allowed to call (the trench's proxies and IPAM); others get PermissionDenied, logged; empty: any SVID the trust bundle verifies"`
}

// EnvPrefix is the prefix of every configuration server environment
// variable.
const EnvPrefix = "nsp"

// Load reads the configuration from the environment and validates it. The
// error names the variable and is meant to follow "nsp: " on the daemon's
// standard error.
func Load() (*Config, error) {
	var c Config
	if err := envconfig.Process(EnvPrefix, &c); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the configuration; the error names its environment
// variable.
func (c *Config) Validate() error {
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("NSP_LOG_LEVEL: %w", err)
	}
	return c.security().Validate()
}

// security is the transport security the configuration asks for.
func (c *Config) security() daemon.SecurityConfig {
	return daemon.SecurityConfig{
		EnvPrefix: "NSP", Insecure: c.Insecure, Plaintext: "the configuration server", AuthorizedIDs: c.AuthorizedIDs,
	}
}

// LogValue renders the configuration in a log line, durations as text.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("port", c.Port),
		slog.String("configFile", c.ConfigFile),
		slog.String("configPollInterval", c.ConfigPollInterval.String()),
		slog.String("logLevel", c.LogLevel),
		slog.Int("metricsPort", c.MetricsPort),
		slog.String("gracePeriod", c.GracePeriod.String()),
		slog.Int("healthPort", c.HealthPort),
		slog.Bool("insecure", c.Insecure),
		slog.Any("authorizedIDs", c.AuthorizedIDs),
	)
}
