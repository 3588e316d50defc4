package nsmsandbox

import (
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/interfacemonitor"
)

// LinkEvents feeds the link events of ns (existing links first) to the
// returned channel until the test ends, as pkg/dataplane's link monitor
// does for the proxy.
func LinkEvents(t *testing.T, ns *testutil.NetNS) <-chan interfacemonitor.LinkEvent {
	t.Helper()
	updates := make(chan netlink.LinkUpdate)
	stop := make(chan struct{})
	handle := ns.Handle
	if err := netlink.LinkSubscribeWithOptions(updates, stop, netlink.LinkSubscribeOptions{
		Namespace: &handle, ListExisting: true,
	}); err != nil {
		t.Fatalf("link subscription in %s: %v", ns.Name, err)
	}
	events := make(chan interfacemonitor.LinkEvent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for u := range updates {
			ev := interfacemonitor.LinkEvent{Index: int(u.Index), Name: u.Attrs().Name, Deleted: u.Header.Type == unix.RTM_DELLINK}
			select {
			case events <- ev:
			case <-stop:
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done // the subscription closes updates once its socket is closed
	})
	return events
}
