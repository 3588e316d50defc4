package main

import (
	"context"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// openLab opens the run (the latest when id is empty), saying why not.
func openLab(base, id string) *labrun.Lab {
	lab, err := labrun.Open(base, id)
	if err != nil {
		fmt.Fprintf(stderr, "lab: %v\n", err)
		return nil
	}
	return lab
}

// onLab runs do on the run that the command line selects (-id, -run-base),
// with a context that ends on SIGINT or SIGTERM, once c has parsed args;
// do gets the positional arguments.
func onLab(c *cmdLine, args []string, do func(ctx context.Context, lab *labrun.Lab, pos []string) int) int {
	id, base := c.runSelection(true)
	pos, code, ok := c.parse(args)
	if !ok {
		return code
	}
	lab := openLab(*base, *id)
	if lab == nil {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return do(ctx, lab, pos)
}

// statusCmd is `lab status`: exit status 1 when the process that runs the
// lab or a component the run expects (all but those stopped on request)
// does not run.
func statusCmd(args []string) int {
	return onLab(newCmdLine("lab status"), args, func(_ context.Context, lab *labrun.Lab, _ []string) int {
		down, err := lab.Status(stdout)
		if err != nil {
			fmt.Fprintf(stderr, "lab: %v\n", err)
			return 1
		}
		if len(down) > 0 {
			fmt.Fprintf(stderr, "lab %s: not running: %s\n", lab.ID(), strings.Join(down, ", "))
			return 1
		}
		return 0
	})
}

// checkCmd is `lab check`: the checks once, or with -wait until they pass.
func checkCmd(args []string) int {
	c := newCmdLine("lab check")
	wait := c.Bool("wait", false, "run the checks until they all pass (at most -timeout)")
	timeout := c.Duration("timeout", labrun.DefaultSettleTimeout, "with -wait: how long the checks may take to pass")
	c.requires = append(c.requires, [2]string{"timeout", "wait"})
	return onLab(c, args, func(ctx context.Context, lab *labrun.Lab, _ []string) int {
		var rep labrun.Report
		var err error
		if *wait {
			rep, err = lab.WaitGreen(ctx, *timeout, stdout)
		} else {
			rep, err = lab.Check(ctx)
		}
		rep.Print(stdout)
		if err != nil {
			fmt.Fprintf(stderr, "lab: %v\n", err)
			return 1
		}
		if !rep.OK() {
			return 1
		}
		return 0
	})
}

func downCmd(args []string) int {
	c := newCmdLine("lab down")
	id, base := c.runSelection(true)
	all := c.Bool("all", false, "tear every recorded run down")
	c.exclusive = append(c.exclusive, [2]string{"id", "all"})
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	ids := []string{*id}
	if *all {
		runs, err := labrun.List(*base)
		if err != nil {
			fmt.Fprintf(stderr, "lab: %v\n", err)
			return 1
		}
		ids = nil
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if len(ids) == 0 {
			fmt.Fprintln(stdout, "no lab run recorded")
			return 0
		}
	}
	code := 0
	for _, i := range ids {
		lab, err := labrun.Open(*base, i)
		if err != nil {
			fmt.Fprintf(stderr, "lab: %v\n", err)
			code = 1
			continue
		}
		if err := lab.Down(); err != nil {
			fmt.Fprintf(stderr, "lab %s: down: %v (logs in %s)\n", lab.ID(), err, lab.LogDir())
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "lab %s: down; logs in %s\n", lab.ID(), lab.LogDir())
	}
	return code
}

func listCmd(args []string) int {
	c := newCmdLine("lab list")
	_, base := c.runSelection(false)
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	runs, err := labrun.List(*base)
	if err != nil {
		fmt.Fprintf(stderr, "lab: %v\n", err)
		return 1
	}
	if len(runs) == 0 {
		fmt.Fprintln(stdout, "no lab run recorded")
	}
	for _, r := range runs {
		owner := "owner gone (crashed: `lab down --id " + r.ID + "`)"
		if r.OwnerAlive {
			owner = fmt.Sprintf("running (pid %d)", r.Owner)
		}
		fmt.Fprintf(stdout, "%s  %s  %s\n", r.ID, r.Created.Local().Format(time.DateTime), owner)
	}
	return 0
}

// componentCmd is `lab stop|start|restart <component>`: it asks the process
// that runs the lab to act on one of its components. start and restart
// then wait until the lab's checks pass again, unless -no-wait.
func componentCmd(verb string, args []string) int {
	c := newCmdLine("lab "+verb, "component")
	grace := labrun.DefaultGrace
	if verb != "start" {
		c.DurationVar(&grace, "grace", labrun.DefaultGrace, "how long a stop waits after SIGTERM before SIGKILL")
	}
	noWait, timeout := new(bool), new(time.Duration)
	if verb != "stop" {
		noWait, timeout = c.waitFlags("the component serves")
	}
	return onLab(c, args, func(ctx context.Context, lab *labrun.Lab, pos []string) int {
		name := pos[0]
		if err := lab.Control(verb, name, grace); err != nil {
			fmt.Fprintf(stderr, "lab %s: %s %s: %v\n", lab.ID(), verb, name, err)
			return 1
		}
		if verb == "stop" || *noWait {
			fmt.Fprintf(stdout, "lab %s: %s %s: done\n", lab.ID(), verb, name)
			return 0
		}
		fmt.Fprintf(stdout, "lab %s: %s %s: done; waiting for the checks to pass again\n", lab.ID(), verb, name)
		rep, err := lab.WaitGreen(ctx, *timeout, stdout)
		if err != nil {
			rep.Print(stdout)
			fmt.Fprintf(stderr, "lab %s: %s %s: the lab did not settle: %v\n", lab.ID(), verb, name, err)
			return 1
		}
		fmt.Fprintf(stdout, "lab %s: %s %s: all %d checks pass\n", lab.ID(), verb, name, len(rep.Rows))
		return 0
	})
}

// debugCmd is `lab debug`: the running proxy's state, as `proxy -debug`
// prints it.
func debugCmd(args []string) int {
	return onLab(newCmdLine("lab debug"), args, func(ctx context.Context, lab *labrun.Lab, _ []string) int {
		out, err := lab.ProxyDebug(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "lab %s: debug: %v\n", lab.ID(), err)
			return 1
		}
		_, _ = stdout.Write(out)
		return 0
	})
}

// breakCmd is `lab break [-loss N] <lb|target>`: the datapath between an
// LB or a target and the proxy broken, NSM told nothing (labrun.Break).
func breakCmd(args []string) int {
	c := newCmdLine("lab break", "lb|target")
	loss := c.Int("loss", 100, "the percentage of the packets dropped at random each way (100: all)")
	return onLab(c, args, func(_ context.Context, lab *labrun.Lab, pos []string) int {
		if err := lab.Break(pos[0], *loss); err != nil {
			fmt.Fprintf(stderr, "lab %s: break %s: %v\n", lab.ID(), pos[0], err)
			return 1
		}
		fmt.Fprintf(stdout, "lab %s: %s's datapath toward the proxy drops %d %% of its packets; `lab mend %s` undoes it\n", lab.ID(), pos[0], *loss, pos[0])
		return 0
	})
}

// mendCmd is `lab mend <lb|target>`: what `lab break` did, undone.
func mendCmd(args []string) int {
	return onLab(newCmdLine("lab mend", "lb|target"), args, func(_ context.Context, lab *labrun.Lab, pos []string) int {
		if err := lab.Mend(pos[0]); err != nil {
			fmt.Fprintf(stderr, "lab %s: mend %s: %v\n", lab.ID(), pos[0], err)
			return 1
		}
		fmt.Fprintf(stdout, "lab %s: %s's datapath mended\n", lab.ID(), pos[0])
		return 0
	})
}
