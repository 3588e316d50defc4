package ipamd

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/causeway-net/causeway/internal/envload"
)

// command does what the ipam subcommands (restore, import) share: the
// configuration from the environment, the -datasource flag, the command's
// own flags (defined by flags) and their parsing. It returns nil when the
// command must exit with status 2; the reason is on stderr.
func command(name, usage string, args []string, stderr io.Writer, flags func(*flag.FlagSet, *Config)) *Config {
	var c Config
	if err := envload.Process(EnvPrefix, &c); err != nil {
		fmt.Fprintf(stderr, "%s: cannot read the IPAM_* environment:\n%v\n", name, err)
		return nil
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Datasource, "datasource", c.Datasource, "the store file (default IPAM_DATASOURCE)")
	flags(fs, &c)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil
	}
	if fs.NArg() > 0 || c.Datasource == "" {
		fs.Usage()
		return nil
	}
	return &c
}

// namespaceFlag defines -namespace, the namespace of the records on the
// Kubernetes store, for the commands that reach it.
func namespaceFlag(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.KubeNamespace, "namespace", c.KubeNamespace, "the namespace of the records (default IPAM_KUBE_NAMESPACE, or the pod's)")
}

// leaseWaitFlag defines -wait for the commands that take the replicas'
// Lease (openKubeCommand), into wait.
func leaseWaitFlag(fs *flag.FlagSet, wait *time.Duration) {
	fs.DurationVar(wait, "wait", *wait, "how long to wait for the replicas' Lease to be free (a killed replica's ends after its duration)")
}
