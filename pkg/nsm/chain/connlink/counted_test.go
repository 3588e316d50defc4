package connlink_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// countedDataplane is the dataplane as the proxy (Apply) and the link
// matcher (Link, LinkByName) see it, recording the calls that take a link
// index into it: the first Apply that has the index as a port, and each
// Apply that removes it.
type countedDataplane struct {
	dp *dataplane.Dataplane

	mu      sync.Mutex
	entries map[int][]string // link index → the calls that took it, in order
}

func (c *countedDataplane) Apply(s dataplane.State) error {
	c.mu.Lock()
	for _, p := range s.Ports {
		if len(c.entries[p.Index]) == 0 {
			c.recordLocked(p.Index, "Apply")
		}
	}
	for _, l := range s.Remove {
		c.recordLocked(l.Index, "Remove")
	}
	c.mu.Unlock()
	return c.dp.Apply(s)
}

func (c *countedDataplane) Link(index int) (dataplane.Link, bool) { return c.dp.Link(index) }

func (c *countedDataplane) LinkByName(name string) (dataplane.Link, bool) {
	return c.dp.LinkByName(name)
}

func (c *countedDataplane) recordLocked(index int, call string) {
	if c.entries == nil {
		c.entries = map[int][]string{}
	}
	c.entries[index] = append(c.entries[index], call)
}

func (c *countedDataplane) of(index int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[index]
}

// The link of a connection enters the dataplane once on its way to being
// a port: in the Apply that enslaves it. The proxy once also handed it to
// SupersedeHeld and RemoveLink (since gone: the links to remove are part
// of the State), under the matcher's lock, before that
// Apply; the matcher only finds it in the link table, by name or by the
// index of its event.
func TestKernelLinkEntersTheDataplaneOnce(t *testing.T) {
	r, targets := newRoundTrip(t, forwarderFunc(func(*networkservice.Connection) {}))
	_, err := r.lbs.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: kernelConn("lb-1", "nsm-lb1")})
	require.NoError(t, err)
	_, err = targets.Request(t.Context(), &networkservice.NetworkServiceRequest{Connection: kernelConn("t1", "nsm-t1")})
	require.NoError(t, err)
	r.veth(t, "nsm-lb1")
	r.veth(t, "nsm-t1")
	r.eventually(t, "both ports", func(s string) bool { return strings.Count(s, "master bridge0") == 2 },
		"sh", "-c", "ip link show nsm-lb1; ip link show nsm-t1")
	for _, name := range []string{"nsm-lb1", "nsm-t1"} {
		l, ok := r.dp.LinkByName(name)
		require.True(t, ok)
		require.Equal(t, []string{"Apply"}, r.calls.of(l.Index), "%s: the calls that took its index", name)
	}
}
