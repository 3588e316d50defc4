package testutil

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// LeakSettle bounds how long VerifyTestMain lets goroutines that are still
// ending finish. A bound on "it happened at all": the NSM SDK ends some of
// its goroutines after their context is done without waiting for them (a
// file watcher closes its inotify descriptor, which waits for its reader),
// and on a loaded machine that takes longer than goleak's own retries
// (about a second).
const LeakSettle = 30 * time.Second

// VerifyTestMain runs the package's tests and fails the package, as
// goleak.VerifyTestMain does, when goroutines outlive them: any left after
// LeakSettle are reported. A goroutine that never ends still fails it.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := settledLeaks(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// settledLeaks is goleak.Find's answer once nothing more ends within
// LeakSettle.
func settledLeaks(opts ...goleak.Option) error {
	deadline := time.Now().Add(LeakSettle)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
