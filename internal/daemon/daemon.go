// Package daemon is the common main of Causeway's service binaries (ipam,
// nsp, proxy): the -version flag and the service's one-shot modes,
// configuration loading with exit status 2 on error, the JSON logger at the
// configured level (optionally switched by SIGUSR1/SIGUSR2), the signal
// context, and exit status 1 when the service fails (or the status of an
// *ExitError); and what their gRPC servers share: the plain-text health
// port (ListenHealth) and the keepalive policy toward proxies (ProxyPings).
// Their transport security is pkg/grpcsecurity's.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/internal/logging"
)

// Service describes one binary.
type Service[C any] struct {
	// Name prefixes error messages and is the logs' component.
	Name    string
	Version string
	// Env names the environment variables of the configuration, for the
	// usage ("NSM_*").
	Env string
	// Load reads and validates the configuration.
	Load func() (C, error)
	// LogLevel returns the configured level name (validated by Load).
	LogLevel func(C) string
	// Run serves until ctx ends.
	Run func(ctx context.Context, cfg C, logger *slog.Logger) error

	// Commands are subcommands with arguments of their own, each selected
	// by its name as the first argument ("ipam restore …"); Main hands
	// them the rest of the arguments and exits with what they return.
	Commands []Command
	// Modes are one-shot commands, each selected by a boolean flag: with
	// the flag set, Main loads the configuration and runs the mode instead
	// of the service (exit status 0, or 1 after printing its error).
	Modes []Mode[C]
	// StopSignals end Run's context; by default SIGINT and SIGTERM.
	StopSignals []os.Signal
	// LevelSignals makes SIGUSR2 switch the log level to TRACE and SIGUSR1
	// put back the configured one while the service runs.
	LevelSignals bool
	// GCPercent, when above 0, is the garbage collector's target
	// percentage unless the environment sets GOGC (Go's default is 100: the
	// heap may grow to twice what is live before a collection).
	GCPercent int
}

// Command is a subcommand of a service's binary (the IPAM's restore).
type Command struct {
	Name, Usage string
	// Run parses args (those after the name) and returns the exit status.
	Run func(args []string, stdout, stderr io.Writer) int
}

// Mode is a one-shot command of a service (the proxy's -debug, -probe).
type Mode[C any] struct {
	Flag, Usage string
	// ValueName, when set, makes Flag take a value (named so in the
	// usage); the mode runs when the value is not empty, through RunValue.
	ValueName string
	// Run (a flag without value) writes its result to stdout; ctx ends on a
	// stop signal. An *ExitError chooses the exit status.
	Run func(ctx context.Context, cfg C, stdout io.Writer) error
	// RunValue is Run for a flag with a value.
	RunValue func(ctx context.Context, cfg C, value string, stdout io.Writer) error
	// Flags, if set, registers the mode's own further flags.
	Flags func(fs *flag.FlagSet)
}

// register registers m's flags and returns what tells whether it was given.
func (m Mode[C]) register(fs *flag.FlagSet) func() (string, bool) {
	if m.Flags != nil {
		m.Flags(fs)
	}
	if m.ValueName != "" {
		v := fs.String(m.Flag, "", m.Usage)
		return func() (string, bool) { return *v, *v != "" }
	}
	b := fs.Bool(m.Flag, false, m.Usage)
	return func() (string, bool) { return "", *b }
}

var defaultStopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// Main runs s with the command-line args and returns the exit status.
func Main[C any](s Service[C], args []string, stdout, stderr io.Writer) int {
	for _, c := range s.Commands {
		if len(args) > 0 && args[0] == c.Name {
			return c.Run(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet(s.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs, s.Name, s.Env, s.Commands) }
	showVersion := fs.Bool("version", false, "print the version and exit")
	modes := make([]func() (string, bool), len(s.Modes))
	for i, m := range s.Modes {
		modes[i] = m.register(fs)
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q (the service takes its configuration from the environment)\n", s.Name, fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, s.Version)
		return 0
	}
	cfg, err := s.Load()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", s.Name, err)
		return 2
	}
	stopSignals := s.StopSignals
	if len(stopSignals) == 0 {
		stopSignals = defaultStopSignals
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	for i, m := range s.Modes {
		if value, on := modes[i](); on {
			return runMode(ctx, s.Name, m, cfg, value, stdout, stderr)
		}
	}
	return serve(ctx, s, cfg, stderr)
}

// usage prints the binary's synopsis: its flags, then its subcommands.
func usage(fs *flag.FlagSet, name, env string, commands []Command) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: %s [flags]\n", name)
	for _, c := range commands {
		fmt.Fprintf(w, "       %s %s …\n", name, c.Name)
	}
	if env != "" {
		fmt.Fprintf(w, "The service's configuration is the %s environment variables (see the README).\n", env)
	}
	fmt.Fprintln(w, "Flags:")
	fs.PrintDefaults()
	if len(commands) > 0 {
		fmt.Fprintln(w, "Commands (each with -h for its own flags):")
		for _, c := range commands {
			fmt.Fprintf(w, "  %s\n    \t%s\n", c.Name, c.Usage)
		}
	}
}

func runMode[C any](ctx context.Context, name string, m Mode[C], cfg C, value string, stdout, stderr io.Writer) int {
	var err error
	if m.ValueName != "" {
		err = m.RunValue(ctx, cfg, value, stdout)
	} else {
		err = m.Run(ctx, cfg, stdout)
	}
	var exit *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		fmt.Fprintf(stderr, "%s: %s\n", name, exit.Message)
		return exit.Status
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
}

// serve runs the service with its logger (also the process's default one
// while it runs) until ctx ends.
func serve[C any](ctx context.Context, s Service[C], cfg C, stderr io.Writer) int {
	level, _ := logging.ParseLevel(s.LogLevel(cfg))
	logger, levelVar := logging.New(stderr, s.Name, level)
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(logger)
	if s.LevelSignals {
		defer logging.FollowLevelSignals(levelVar, level, logger)()
	}
	gc, gcDefault := applyGCPercent(s.GCPercent)
	logger.Info("starting", "version", s.Version, "gc_percent", gc, "gc_percent_default", gcDefault, "config", cfg)
	if err := s.Run(ctx, cfg, logger); err != nil {
		var exit *ExitError
		if errors.As(err, &exit) {
			logger.Error(s.Name+" failed", "error", err, "exit_status", exit.Status)
			fmt.Fprintf(stderr, "%s: %s\n", s.Name, exit.Message)
			return exit.Status
		}
		logger.Error(s.Name+" failed", "error", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}

// ExitError is a failure of Run with an exit status of its own (not 1, the
// generic failure, nor 2, a configuration error): Main logs it, then prints
// Message as one line after the service's name on standard error, for the
// operator, and exits with Status.
type ExitError struct {
	Status  int
	Message string
	Err     error
}

func (e *ExitError) Error() string { return e.Message }

func (e *ExitError) Unwrap() error { return e.Err }

// StopServing stops a service's servers at the end of Run: the gRPC server
// finishes the calls in flight for at most grace, then is cut; the metrics
// server (if any) is shut down within grace too.
func StopServing(logger *slog.Logger, gs *grpc.Server, metrics *http.Server, grace time.Duration) {
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(grace):
		logger.Warn("grace period over; stopping the gRPC server")
		gs.Stop()
		<-stopped
	}
	if metrics != nil {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		_ = metrics.Shutdown(ctx)
	}
}
