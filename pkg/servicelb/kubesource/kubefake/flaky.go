// Package kubefake holds what tests of the Kubernetes source do to
// client-go's fake clientset: an API server that goes away (Flaky). It is
// for tests only; the proxy does not link it.
package kubefake

import (
	"errors"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// ErrAPIDown is what the calls of a Flaky API answer while it is down.
var ErrAPIDown = errors.New("connection refused")

// Flaky makes a fake clientset's lists and watches fail while down, and
// breaks the open watches when it goes down.
type Flaky struct {
	down     atomic.Bool
	failures atomic.Int64

	mu       sync.Mutex
	watchers []watch.Interface
}

// NewFlaky installs a Flaky API in front of c's tracker (up).
func NewFlaky(c *fake.Clientset) *Flaky {
	f := &Flaky{}
	c.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if f.down.Load() {
			f.failures.Add(1)
			return true, nil, ErrAPIDown
		}
		return false, nil, nil
	})
	c.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if f.down.Load() {
			f.failures.Add(1)
			return true, nil, ErrAPIDown
		}
		w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace())
		f.mu.Lock()
		f.watchers = append(f.watchers, w)
		f.mu.Unlock()
		return true, w, err
	})
	return f
}

// GoDown fails every list and watch from now on and breaks the open
// watches mid-stream.
func (f *Flaky) GoDown() {
	f.down.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watchers {
		w.Stop()
	}
	f.watchers = nil
}

// SetDown fails (or stops failing) the calls from now on, leaving open
// watches alone.
func (f *Flaky) SetDown(down bool) { f.down.Store(down) }

// Failures counts the calls failed so far.
func (f *Flaky) Failures() int64 { return f.failures.Load() }
