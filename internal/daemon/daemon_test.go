package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type cfg struct{ level string }

func service(loadErr, runErr error) Service[cfg] {
	return Service[cfg]{
		Name:     "svc",
		Version:  "v1",
		Env:      "SVC_*",
		Load:     func() (cfg, error) { return cfg{level: "INFO"}, loadErr },
		LogLevel: func(c cfg) string { return c.level },
		Run:      func(context.Context, cfg, *slog.Logger) error { return runErr },
		Commands: []Command{{Name: "restore", Usage: "put it back", Run: func(args []string, stdout, _ io.Writer) int {
			fmt.Fprintf(stdout, "restore %v\n", args)
			return 7
		}}},
	}
}

func TestMainExitStatuses(t *testing.T) {
	cases := []struct {
		name          string
		args          []string
		loadErr, run  error
		want          int
		stdout, inErr string
	}{
		{name: "version", args: []string{"-version"}, want: 0, stdout: "v1\n"},
		{name: "bad flag", args: []string{"-nope"}, want: 2, inErr: "flag provided but not defined"},
		{name: "stray argument", args: []string{"check", "-h"}, want: 2, inErr: `svc: unexpected argument "check"`},
		{name: "help", args: []string{"-h"}, want: 0, inErr: "Usage: svc [flags]\n       svc restore …\nThe service's configuration is the SVC_* environment variables"},
		{name: "command", args: []string{"restore", "a", "-b"}, want: 7, stdout: "restore [a -b]\n"},
		{name: "bad config", loadErr: errors.New("SVC_PORT: not a port"), want: 2, inErr: "svc: SVC_PORT: not a port"},
		{name: "failure", run: errors.New("boom"), want: 1, inErr: `"msg":"svc failed","component":"svc","error":"boom"`},
		{name: "clean stop", want: 0, inErr: `"msg":"stopped"`},
		{name: "own status", run: fmt.Errorf("wrapped: %w", &ExitError{Status: 3, Message: "the file is bad; do this"}), want: 3, inErr: "\nsvc: the file is bad; do this\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := Main(service(tc.loadErr, tc.run), tc.args, &out, &errOut); got != tc.want {
				t.Fatalf("exit status %d, want %d (stderr %q)", got, tc.want, errOut.String())
			}
			if tc.stdout != "" && out.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", out.String(), tc.stdout)
			}
			if !strings.Contains(errOut.String(), tc.inErr) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.inErr)
			}
		})
	}
}

func TestMainRunsAMode(t *testing.T) {
	s := service(nil, errors.New("the service must not run"))
	var got cfg
	s.Modes = []Mode[cfg]{{Flag: "dump", Usage: "print the state", Run: func(_ context.Context, c cfg, w io.Writer) error {
		got = c
		_, err := io.WriteString(w, "state\n")
		return err
	}}, {Flag: "broken", Run: func(context.Context, cfg, io.Writer) error { return errors.New("no socket") }}}

	var out, errOut bytes.Buffer
	if st := Main(s, []string{"-dump"}, &out, &errOut); st != 0 || out.String() != "state\n" || got.level != "INFO" {
		t.Fatalf("-dump: status %d, stdout %q, config %+v, stderr %q", st, out.String(), got, errOut.String())
	}
	out.Reset()
	if st := Main(s, []string{"-broken"}, &out, &errOut); st != 1 || !strings.HasSuffix(errOut.String(), "svc: no socket\n") {
		t.Fatalf("-broken: status %d, stderr %q", st, errOut.String())
	}
	errOut.Reset()
	bad := service(errors.New("SVC_PORT: not a port"), nil)
	bad.Modes = s.Modes
	if st := Main(bad, []string{"-dump"}, &out, &errOut); st != 2 {
		t.Fatalf("-dump with a bad configuration: status %d, stderr %q", st, errOut.String())
	}
}

// TestMainFollowsSignals runs a service that signals its own process: SIGUSR2
// turns TRACE on in its logger, and a stop signal of the service's list
// (here SIGHUP) ends its context and makes a clean stop.
func TestMainFollowsSignals(t *testing.T) {
	s := service(nil, nil)
	s.LevelSignals = true
	s.StopSignals = []os.Signal{syscall.SIGHUP}
	s.Run = func(ctx context.Context, _ cfg, logger *slog.Logger) error {
		if logger.Enabled(ctx, logging.LevelTrace) {
			return errors.New("TRACE on before SIGUSR2")
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
			return err
		}
		for !logger.Enabled(ctx, logging.LevelTrace) {
			select {
			case <-ctx.Done():
				return errors.New("stopped before TRACE was on")
			case <-time.After(5 * time.Millisecond):
			}
		}
		logger.Log(ctx, logging.LevelTrace, "traced")
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}
	var out testutil.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- Main(s, nil, io.Discard, &out) }()
	select {
	case st := <-done:
		if st != 0 {
			t.Fatalf("exit status %d, stderr %q", st, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no stop on SIGHUP; stderr %q", out.String())
	}
	for _, line := range []string{`"msg":"log level changed","component":"svc","level":"TRACE"`, `"level":"TRACE","msg":"traced"`, `"msg":"stopped"`} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("stderr lacks %s: %q", line, out.String())
		}
	}
}

// TestGCPercent: a service's default collector target applies only when
// GOGC is unset; GOGC (a number or "off") is left to the runtime.
func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		def     int
		gogc    string
		want    int
		applied bool
	}{
		{50, "", 50, true},
		{50, "200", 0, false},
		{50, "off", 0, false},
		{0, "", 0, false},
	} {
		got, applied := gcPercent(tc.def, func(k string) string {
			if k == "GOGC" {
				return tc.gogc
			}
			return ""
		})
		if got != tc.want || applied != tc.applied {
			t.Errorf("default %d, GOGC %q: got %d, %v; want %d, %v", tc.def, tc.gogc, got, applied, tc.want, tc.applied)
		}
	}
}

// TestMainAppliesTheGCPercent: a service that asks for a collector target
// runs with it and says so in its "starting" line.
func TestMainAppliesTheGCPercent(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	s := service(nil, nil)
	s.GCPercent = 50
	var out, errOut bytes.Buffer
	if got := Main(s, nil, &out, &errOut); got != 0 {
		t.Fatalf("exit status %d (stderr %q)", got, errOut.String())
	}
	if !strings.Contains(errOut.String(), `"gc_percent":50,"gc_percent_default":true`) {
		t.Errorf("stderr %q lacks the collector target", errOut.String())
	}
	if p := debug.SetGCPercent(100); p != 50 {
		t.Errorf("the collector target is %d, want 50", p)
	}
}
