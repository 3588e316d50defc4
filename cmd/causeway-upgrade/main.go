// Command causeway-upgrade moves each node's proxy to its DaemonSet's new
// template, one node at a time: in place when only container images (and
// labels) changed, the pod and its network namespace kept, otherwise by
// replacing the pod. The chart runs it from the proxy's image as a Job of
// each release revision, and again, with UPGRADE_REPORT, as the hook that
// reports on that Job. Configuration comes from UPGRADE_* environment
// variables; the work is done by pkg/upgrade.
package main

import (
	"os"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/upgrade"
)

var version = "dev"

func main() {
	os.Exit(daemon.Main(daemon.Service[*upgrade.Config]{
		Name:     "causeway-upgrade",
		Version:  version,
		Env:      "UPGRADE_*",
		Load:     upgrade.Load,
		LogLevel: func(c *upgrade.Config) string { return c.LogLevel },
		Run:      upgrade.Run,
	}, os.Args[1:], os.Stdout, os.Stderr))
}
