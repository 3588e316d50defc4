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

// SDKLeaks are the goroutines that the NSM SDK's dependencies leave
// behind by their own design, for goleak to ignore in the packages whose
// tests run the SDK:
//   - glog's and opencensus' package-level workers, started at init;
//   - grpcfd v1.1.4's SendFilename forwarding goroutine, which writes every
//     error of a send into a channel of one slot that the SDK's sendfd
//     client reads once at most: when a send to a peer that went away
//     fails twice, it blocks for ever (a target stopped while it
//     connected, an LB lost).
func SDKLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/edwarnicke/grpcfd.(*connWrap).SendFilename.func1"),
	}
}
