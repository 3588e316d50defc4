package proxyd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/health"
)

// ProbeMode is `proxy -probe KIND [-probe-timeout D]`, the chart's exec
// probe: it asks the running proxy's health socket for the probe KIND
// (startup, readiness or liveness) and exits 0 only if it is serving, 1
// if not (or no answer; the message names the failing checks), 2 for an
// unknown KIND. A serving probe with warnings prints them ("Readiness:
// SERVING; warning: Datapath: nexthop 172.16.0.3 down") and exits 0. The
// image needs no probe tool of its own.
func ProbeMode() daemon.Mode[*Config] {
	timeout := 2 * time.Second
	return daemon.Mode[*Config]{
		Flag: "probe", ValueName: "kind",
		Usage: "ask the running proxy's health socket for the probe `kind` (startup, readiness or liveness); exit 0 only if it is serving (a Kubernetes exec probe)",
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "probe-timeout", timeout, "how long -probe waits for an answer")
		},
		RunValue: func(ctx context.Context, cfg *Config, kind string, out io.Writer) error {
			service, err := health.ProbeService(kind)
			if err != nil {
				return &daemon.ExitError{Status: 2, Message: "-probe: " + err.Error(), Err: err}
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			warnings, err := health.Probe(ctx, cfg.HealthSocket, kind, probeSubservices[service]...)
			if err == nil && len(warnings) > 0 {
				_, err = fmt.Fprintf(out, "%s: SERVING%s\n", service, health.WarningText(warnings))
			}
			return err
		},
	}
}
