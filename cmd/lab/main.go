// Command lab runs Causeway's whole system on one machine, in network
// namespaces: `lab run` brings a lab up (see pkg/lab/labrun), checks it end
// to end and keeps it up until Ctrl-C; `lab status`, `lab check` and
// `lab down` act on a run from another terminal, also after a crash. The
// hidden subcommands `lab nsm`, `lab lb` and `lab target` are the NSM
// control plane, load balancer and target processes the lab starts.
package main

import (
	"fmt"
	"os"
)

var version = "dev"

const usage = `usage: lab <command> [flags]

commands:
  run      bring a lab up, check it, keep it up until Ctrl-C (--once: check and tear down)
  status   show a lab run (latest, or --id)
  check    run the checks against a running lab (latest, or --id)
  down     tear a lab run down (latest, --id, or --all), also after a crash
  stop     stop a component as Kubernetes ends a pod (SIGTERM, SIGKILL after --grace):
           nsm, nsp, ipam, proxy, an LB or a target
  start    start a stopped component again
  restart  stop, then start a component
  debug    print the running proxy's model and kernel state (proxy -debug)
  list     list the recorded runs
  version  print the version
Run 'lab <command> -h' for the flags of a command. Needs root.
`

// commands are the subcommands, by name.
var commands = map[string]func(args []string) int{
	"run":     runCmd,
	"status":  statusCmd,
	"check":   checkCmd,
	"down":    downCmd,
	"list":    listCmd,
	"stop":    func(args []string) int { return componentCmd("stop", args) },
	"start":   func(args []string) int { return componentCmd("start", args) },
	"restart": func(args []string) int { return componentCmd("restart", args) },
	"debug":   debugCmd,
	"lb":      lbCmd,
	"target":  targetCmd,
	"nsm":     nsmCmd,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	if run, ok := commands[cmd]; ok {
		os.Exit(run(args))
	}
	switch cmd {
	case "version", "-version", "--version":
		fmt.Println(version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "lab: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
}
