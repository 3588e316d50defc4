// Command lab runs Causeway's whole system on one machine, in network
// namespaces: `lab run` brings a lab up (see pkg/lab/labrun), checks it end
// to end and keeps it up until Ctrl-C; `lab status`, `lab check` and
// `lab down` act on a run from another terminal, also after a crash. The
// hidden subcommands `lab nsm`, `lab lb` and `lab target` are the NSM
// control plane, load balancer and target processes the lab starts.
package main

import (
	"fmt"
	"log/slog"
	"os"
)

var version = "dev"

const usage = `usage: lab <command> [flags]

commands:
  run      bring a lab up, check it, keep it up until Ctrl-C (--once: check and tear down)
  status   show a lab run (latest, or --id): each component running (pid) or how it ended;
           exit status 1 when one the run expects (all but those stopped) does not run
  check    run the checks against a running lab (latest, or --id); --wait: until they pass
  down     tear a lab run down (latest, --id, or --all), also after a crash; its logs stay
  stop     stop a component as Kubernetes ends a pod (SIGTERM, SIGKILL after --grace):
           nsm, nsp, ipam, proxy, an LB or a target
  start    start a stopped component again, then wait for the checks (--no-wait: don't)
  restart  stop, then start a component, then wait for the checks (--no-wait: don't)
  break    break the datapath between an LB or a target and the proxy, NSM told nothing
           (--loss N: N % of the packets at random)
  mend     undo what break did
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
	"break":   breakCmd,
	"mend":    mendCmd,
	"debug":   debugCmd,
	"version": versionCmd,
	"lb":      lbCmd,
	"target":  targetCmd,
	"nsm":     nsmCmd,
}

func versionCmd(args []string) int {
	if _, code, ok := newCmdLine("lab version").parse(args); !ok {
		return code
	}
	fmt.Fprintln(stdout, version)
	return 0
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	// What the lab logs (e.g. a process `lab down` found unrecorded):
	// warnings and errors; the stubs install their own JSON logger.
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if run, ok := commands[cmd]; ok {
		os.Exit(run(args))
	}
	switch cmd {
	case "-version", "--version":
		fmt.Fprintln(stdout, version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "lab: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
}
