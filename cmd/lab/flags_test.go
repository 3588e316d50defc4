package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// runCommand runs the subcommand name with args as main does, and returns
// its exit status and what it wrote.
func runCommand(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	prevOut, prevErr := stdout, stderr
	stdout, stderr = &out, &errOut
	t.Cleanup(func() { stdout, stderr = prevOut, prevErr })
	run, ok := commands[name]
	if !ok {
		t.Fatalf("no command %q", name)
	}
	code := run(args)
	return code, out.String(), errOut.String()
}

// TestCommandsRefuseWhatIsNotTheirs: every subcommand refuses, with exit
// status 2 and an error that names it, a flag it does not define (-id
// means nothing to list, -grace nothing to start), an argument it does not
// take and flags that contradict each other; it acts on nothing then.
func TestCommandsRefuseWhatIsNotTheirs(t *testing.T) {
	base := t.TempDir() // no run: a command that got past its command line says so, with status 1
	for _, tc := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"list", []string{"-id", "abc123"}, "-id is not a flag of lab list"},
		{"start", []string{"-grace", "1s", "proxy"}, "-grace is not a flag of lab start"},
		{"stop", []string{"-no-wait", "proxy"}, "-no-wait is not a flag of lab stop"},
		{"stop", []string{"-timeout", "1s", "proxy"}, "-timeout is not a flag of lab stop"},
		{"status", []string{"-all"}, "-all is not a flag of lab status"},
		{"status", []string{"-grace", "1s"}, "-grace is not a flag of lab status"},
		{"check", []string{"-grace", "1s"}, "-grace is not a flag of lab check"},
		{"check", []string{"-timeout", "1s"}, "-timeout means something only with -wait"},
		{"debug", []string{"-all"}, "-all is not a flag of lab debug"},
		{"down", []string{"-grace", "1s"}, "-grace is not a flag of lab down"},
		{"down", []string{"-id", "abc123", "-all"}, "-id and -all exclude each other"},
		{"restart", []string{"-no-wait", "-timeout", "1m", "proxy"}, "-no-wait and -timeout exclude each other"},
		{"run", []string{"-id", "abc123"}, "-id is not a flag of lab run"},
		{"version", []string{"-id", "abc123"}, "-id is not a flag of lab version"},
		{"lb", []string{"-grace", "1s"}, "-grace is not a flag of lab lb"},
		{"status", []string{"extra"}, `unexpected argument "extra"`},
		{"list", []string{"extra"}, `unexpected argument "extra"`},
		{"stop", []string{"proxy", "lb-a"}, `unexpected argument "lb-a"`},
		{"restart", nil, "missing <component>"},
		{"break", nil, "missing <lb|target>"},
		{"break", []string{"-grace", "1s", "lb-a"}, "-grace is not a flag of lab break"},
		{"mend", []string{"-loss", "5", "lb-a"}, "-loss is not a flag of lab mend"},
	} {
		args := append([]string{"-run-base", base}, tc.args...)
		if tc.cmd == "version" || tc.cmd == "lb" {
			args = tc.args
		}
		code, out, errOut := runCommand(t, tc.cmd, args...)
		assert.Equal(t, 2, code, "lab %s %v: %s", tc.cmd, tc.args, errOut)
		assert.Contains(t, errOut, "lab "+tc.cmd+": "+tc.want, "lab %s %v", tc.cmd, tc.args)
		assert.Contains(t, errOut, "usage: lab "+tc.cmd, "the usage follows the error")
		assert.Empty(t, out, "lab %s %v acts on nothing", tc.cmd, tc.args)
	}
}

// TestCommandsTakeTheirFlags: the flags that mean something to a command
// pass its command line, before or after its argument: the command then
// gets as far as the run (none here: status 1, not 2).
func TestCommandsTakeTheirFlags(t *testing.T) {
	base := t.TempDir()
	for _, tc := range []struct {
		cmd  string
		args []string
	}{
		{"status", []string{"-id", "abc123"}},
		{"check", []string{"-wait", "-timeout", "1s"}},
		{"debug", nil},
		{"stop", []string{"proxy", "-grace", "1s"}},
		{"start", []string{"-no-wait", "proxy"}},
		{"start", []string{"-timeout", "1s", "proxy"}},
		{"restart", []string{"-grace", "1s", "proxy", "-timeout", "2m"}},
		{"down", []string{"-id", "abc123"}},
		{"break", []string{"lb-a", "-loss", "5"}},
		{"mend", []string{"lb-a"}},
	} {
		code, _, errOut := runCommand(t, tc.cmd, append([]string{"-run-base", base}, tc.args...)...)
		assert.Equal(t, 1, code, "lab %s %v: %s", tc.cmd, tc.args, errOut)
		assert.NotContains(t, errOut, "usage:", "lab %s %v", tc.cmd, tc.args)
	}
	code, out, errOut := runCommand(t, "list", "-run-base", base)
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "no lab run recorded\n", out, "an empty list says so")
	code, out, _ = runCommand(t, "down", "-run-base", base, "-all")
	assert.Equal(t, 0, code)
	assert.Equal(t, "no lab run recorded\n", out)
	code, out, _ = runCommand(t, "list", "-h")
	assert.Equal(t, 0, code, "-h is no error")
	assert.True(t, strings.HasPrefix(out, "usage: lab list"), out)
}
