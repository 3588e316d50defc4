// Command nsp is Causeway's configuration server: it serves the nsp.v1
// ConfigurationManager API (WatchVip, WatchConduit) from a YAML file that it
// follows for changes. It refuses to start on a missing or invalid file; a
// later broken edit is logged and the last good configuration keeps being
// served. Configuration comes from NSP_* environment variables; the work is
// done by pkg/nspd.
package main

import (
	"os"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/pkg/nspd"
)

var version = "dev"

func main() {
	os.Exit(daemon.Main(daemon.Service[*nspd.Config]{
		Name:     "nsp",
		Version:  version,
		Env:      "NSP_*",
		Load:     nspd.Load,
		LogLevel: func(c *nspd.Config) string { return c.LogLevel },
		Run:      nspd.Run,
	}, os.Args[1:], os.Stdout, os.Stderr))
}
