package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// Where the commands write; tests replace them.
var (
	stdout io.Writer = os.Stdout
	stderr io.Writer = os.Stderr
)

// cmdLine is the command line of one subcommand: the flags it defines and
// the positional arguments it takes. parse is the one place that reads a
// command line of lab: a flag the command does not define, or an argument
// it does not take, is refused with an error that names it (exit status 2).
type cmdLine struct {
	*flag.FlagSet
	// args name the positional arguments, all required, in the usage.
	args []string
	// exclusive are pairs of flags that may not be given together.
	exclusive [][2]string
	// requires are flags that mean something only with another one.
	requires [][2]string
}

func newCmdLine(name string, args ...string) *cmdLine {
	c := &cmdLine{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), args: args}
	c.Usage = c.usage
	return c
}

func (c *cmdLine) usage() {
	w := c.Output()
	fmt.Fprintf(w, "usage: %s [flags]", c.Name())
	for _, a := range c.args {
		fmt.Fprintf(w, " <%s>", a)
	}
	fmt.Fprintln(w)
	n := 0
	c.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		fmt.Fprintln(w, "(no flags)")
		return
	}
	fmt.Fprintln(w, "flags:")
	c.PrintDefaults()
}

// runSelection adds the flags that pick a run: -run-base, and -id unless
// the command acts on every run (list).
func (c *cmdLine) runSelection(withID bool) (id, base *string) {
	if withID {
		id = c.String("id", "", "run id (default: the latest run)")
	}
	base = c.String("run-base", "", "parent of the run directories (default /run/causeway-lab)")
	return id, base
}

// waitFlags adds -no-wait and -timeout: whether and how long a command
// waits for the lab's checks to pass again (labrun.WaitGreen).
func (c *cmdLine) waitFlags(what string) (noWait *bool, timeout *time.Duration) {
	noWait = c.Bool("no-wait", false, "return once "+what+", without waiting for the lab's checks to pass again")
	timeout = c.Duration("timeout", labrun.DefaultSettleTimeout, "how long to wait for the lab's checks to pass again")
	c.exclusive = append(c.exclusive, [2]string{"no-wait", "timeout"})
	return noWait, timeout
}

// parse parses args: flags anywhere (also after the positional arguments,
// `lab stop proxy -grace 5s`; everything after "--" is positional). It
// returns the positional arguments, or false with the exit status when the
// command must not run: 0 for -h, 2 for a command line it refuses, with
// the reason and the usage on stderr.
func (c *cmdLine) parse(args []string) (pos []string, code int, ok bool) {
	c.SetOutput(io.Discard) // the errors are ours to write
	defer c.SetOutput(stderr)
	for {
		if err := c.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.SetOutput(stdout)
				c.usage()
				return nil, 0, false
			}
			if name, found := strings.CutPrefix(err.Error(), "flag provided but not defined: "); found {
				return nil, c.refuse("%s is not a flag of %s", name, c.Name()), false
			}
			return nil, c.refuse("%v", err), false
		}
		args = c.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) > len(c.args) {
		return nil, c.refuse("unexpected argument %q", pos[len(c.args)]), false
	}
	if len(pos) < len(c.args) {
		return nil, c.refuse("missing <%s>", c.args[len(pos)]), false
	}
	set := map[string]bool{}
	c.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, x := range c.exclusive {
		if set[x[0]] && set[x[1]] {
			return nil, c.refuse("-%s and -%s exclude each other", x[0], x[1]), false
		}
	}
	for _, r := range c.requires {
		if set[r[0]] && !set[r[1]] {
			return nil, c.refuse("-%s means something only with -%s", r[0], r[1]), false
		}
	}
	return pos, 0, true
}

// refuse writes why the command line is refused, and the usage, to stderr
// and returns exit status 2.
func (c *cmdLine) refuse(format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n", c.Name(), fmt.Sprintf(format, args...))
	c.SetOutput(stderr)
	c.usage()
	return 2
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }
