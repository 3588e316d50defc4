package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type cfg struct{ level string }

func service(loadErr, runErr error) Service[cfg] {
	return Service[cfg]{
		Name:     "svc",
		Version:  "v1",
		Load:     func() (cfg, error) { return cfg{level: "INFO"}, loadErr },
		LogLevel: func(c cfg) string { return c.level },
		Run:      func(context.Context, cfg, *slog.Logger) error { return runErr },
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
