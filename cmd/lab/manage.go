package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

func openFlags(name string, args []string) (*flag.FlagSet, *string, *string) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	id := fs.String("id", "", "run id (default: the latest run)")
	base := fs.String("run-base", "", "parent of the run directories (default /run/causeway-lab)")
	return fs, id, base
}

// openLab opens the run (the latest when id is empty), saying why not.
func openLab(base, id string) *labrun.Lab {
	lab, err := labrun.Open(base, id)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab: %v\n", err)
		return nil
	}
	return lab
}

// onLab is a command on one run: it parses args (-id, -run-base), opens
// the run and returns what do returns, called with a context that ends on
// SIGINT or SIGTERM.
func onLab(name string, args []string, do func(ctx context.Context, lab *labrun.Lab) int) int {
	fs, id, base := openFlags(name, args)
	_ = fs.Parse(args)
	lab := openLab(*base, *id)
	if lab == nil {
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return do(ctx, lab)
}

func statusCmd(args []string) int {
	return onLab("lab status", args, func(_ context.Context, lab *labrun.Lab) int {
		if err := lab.Status(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
			return 1
		}
		return 0
	})
}

func checkCmd(args []string) int {
	return onLab("lab check", args, func(ctx context.Context, lab *labrun.Lab) int {
		rep, err := lab.Check(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
			return 1
		}
		rep.Print(os.Stdout)
		if !rep.OK() {
			return 1
		}
		return 0
	})
}

func downCmd(args []string) int {
	fs, id, base := openFlags("lab down", args)
	all := fs.Bool("all", false, "tear every recorded run down")
	_ = fs.Parse(args)
	ids := []string{*id}
	if *all {
		runs, err := labrun.List(*base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
			return 1
		}
		ids = nil
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if len(ids) == 0 {
			fmt.Println("no lab run recorded")
			return 0
		}
	}
	code := 0
	for _, i := range ids {
		lab, err := labrun.Open(*base, i)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
			code = 1
			continue
		}
		if err := lab.Down(); err != nil {
			fmt.Fprintf(os.Stderr, "lab %s: down: %v\n", lab.ID(), err)
			code = 1
			continue
		}
		fmt.Printf("lab %s: down\n", lab.ID())
	}
	return code
}

func listCmd(args []string) int {
	fs, _, base := openFlags("lab list", args)
	_ = fs.Parse(args)
	runs, err := labrun.List(*base)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab: %v\n", err)
		return 1
	}
	for _, r := range runs {
		owner := "owner gone (crashed: `lab down --id " + r.ID + "`)"
		if r.OwnerAlive {
			owner = fmt.Sprintf("running (pid %d)", r.Owner)
		}
		fmt.Printf("%s  %s  %s\n", r.ID, r.Created.Local().Format(time.DateTime), owner)
	}
	return 0
}

// componentCmd is `lab stop|start|restart <component>`: it asks the process
// that runs the lab to act on one of its components.
func componentCmd(verb string, args []string) int {
	fs, id, base := openFlags("lab "+verb, args)
	grace := fs.Duration("grace", labrun.DefaultGrace, "how long a stop waits after SIGTERM before SIGKILL")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: lab %s [flags] <component>\ncomponents: nsm, nsp, ipam, proxy, each LB and each target (see lab status)\n", verb)
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	lab := openLab(*base, *id)
	if lab == nil {
		return 1
	}
	name := fs.Arg(0)
	if err := lab.Control(verb, name, *grace); err != nil {
		fmt.Fprintf(os.Stderr, "lab %s: %s %s: %v\n", lab.ID(), verb, name, err)
		return 1
	}
	fmt.Printf("lab %s: %s %s: done\n", lab.ID(), verb, name)
	return 0
}

// debugCmd is `lab debug`: the running proxy's state, as `proxy -debug`
// prints it.
func debugCmd(args []string) int {
	return onLab("lab debug", args, func(ctx context.Context, lab *labrun.Lab) int {
		out, err := lab.ProxyDebug(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lab %s: debug: %v\n", lab.ID(), err)
			return 1
		}
		_, _ = os.Stdout.Write(out)
		return 0
	})
}
