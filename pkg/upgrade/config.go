package upgrade

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/causeway-net/causeway/internal/envload"
	"github.com/causeway-net/causeway/internal/logging"
)

// PauseAnnotation on a DaemonSet, set to "true", pauses its upgrade before
// its next pod (`kubectl annotate ds <name> causeway.io/upgrade-pause=true`).
const PauseAnnotation = "causeway.io/upgrade-pause"

// ErrPaused ends a run that found a DaemonSet paused (PauseAnnotation).
var ErrPaused = errors.New("upgrade paused")

// Config is read from UPGRADE_* environment variables.
type Config struct {
	Namespace    string        `desc:"namespace of the DaemonSets (the release's)"`
	Selector     string        `default:"causeway.io/conduit" desc:"label selector of the proxy DaemonSets to upgrade (those of other update strategies than OnDelete are left alone)"`
	ReadyTimeout time.Duration `default:"5m" split_words:"true" desc:"how long a node's proxy may take to be ready again before the upgrade stops"`
	PollInterval time.Duration `default:"2s" split_words:"true" desc:"how often a pod's readiness is read while waiting for it"`
	Runs         string        `desc:"label selector of the pods that run upgrades of these DaemonSets: a run waits until no other one is pending or running (empty: it does not wait)"`
	Pod          string        `desc:"this run's own pod, left out of UPGRADE_RUNS (the downward API's metadata.name)"`
	Report       string        `desc:"name of an upgrade Job to report on instead of upgrading: its pod's log is copied to the standard output as it comes, and the run fails when the Job failed"`
	Kubeconfig   string        `desc:"kubeconfig file; empty: the pod's service account"`
	LogLevel     string        `default:"INFO" split_words:"true" desc:"log level"`
}

// EnvPrefix is the prefix of every upgrade environment variable.
const EnvPrefix = "upgrade"

// Load reads the configuration from the environment and validates it.
func Load() (*Config, error) {
	var c Config
	if err := envload.Process(EnvPrefix, &c); err != nil {
		return nil, fmt.Errorf("cannot read the UPGRADE_* environment:\n%w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the configuration and returns every problem found, each
// naming its environment variable.
func (c *Config) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("UPGRADE_NAMESPACE: empty"))
	}
	if _, err := labels.Parse(c.Selector); err != nil {
		errs = append(errs, fmt.Errorf("UPGRADE_SELECTOR: %w", err))
	}
	if _, err := labels.Parse(c.Runs); err != nil {
		errs = append(errs, fmt.Errorf("UPGRADE_RUNS: %w", err))
	}
	if c.Runs != "" && c.Pod == "" {
		errs = append(errs, errors.New("UPGRADE_POD: empty, but UPGRADE_RUNS is set: a run would wait for itself"))
	}
	if c.ReadyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("UPGRADE_READY_TIMEOUT: %v is not positive", c.ReadyTimeout))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("UPGRADE_POLL_INTERVAL: %v is not positive", c.PollInterval))
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("UPGRADE_LOG_LEVEL: %w", err))
	}
	return errors.Join(errs...)
}
