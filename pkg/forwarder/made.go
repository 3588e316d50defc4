package forwarder

import (
	"log/slog"
	"sync"
)

// kernelObject is what a client element makes in the kernel for one
// connection (a veth pair, a VXLAN device), with the namespace handles it
// keeps so that Close can remove it whatever happened to the file
// descriptors the NSM peers passed.
type kernelObject interface {
	// key says where and how the object is placed: when it changes (a heal
	// toward another NSE, a new VNI), the old object is replaced.
	key() string
	// present reports whether the object made by this run is still there.
	present() bool
	// adoptable reports whether an object that an earlier run made is
	// there, whole, and may be taken over.
	adoptable() bool
	// clearWay removes leftovers in the object's way (a lost Close, a
	// link under its name).
	clearWay()
	create() error
	// remove deletes the object from the kernel.
	remove()
	// close releases the namespace handles.
	close()
	// attrs describe the object in logs.
	attrs() []any
}

// madeFor keeps the kernel objects an element made, by client-side
// connection id, and owns their lifecycle: idempotent across refreshes,
// adopted from an earlier run (a restarted forwarder must not cut the data
// paths it set up; NSM's forwarders do the same), replaced when moved,
// removed on Close.
type madeFor[T kernelObject] struct {
	kind   string
	mu     sync.Mutex
	byConn map[string]T
}

func newMadeFor[T kernelObject](kind string) *madeFor[T] {
	return &madeFor[T]{kind: kind, byConn: make(map[string]T)}
}

// ensure makes the kernel hold want for connID; it takes over want's
// namespace handles (closed when they are not kept).
func (m *madeFor[T]) ensure(connID string, want T) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if have, ok := m.byConn[connID]; ok {
		if have.key() == want.key() && have.present() {
			want.close()
			return nil
		}
		have.remove()
		have.close()
		delete(m.byConn, connID)
	}
	if want.adoptable() {
		m.byConn[connID] = want
		slog.Info(m.kind+" adopted from an earlier forwarder run", append([]any{"conn", connID}, want.attrs()...)...)
		return nil
	}
	want.clearWay()
	if err := want.create(); err != nil {
		want.close()
		return err
	}
	m.byConn[connID] = want
	slog.Info(m.kind+" created", append([]any{"conn", connID}, want.attrs()...)...)
	return nil
}

// remove deletes the object of connID, if any.
func (m *madeFor[T]) remove(connID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.byConn[connID]
	if !ok {
		return
	}
	delete(m.byConn, connID)
	o.remove()
	o.close()
	slog.Info(m.kind+" deleted", append([]any{"conn", connID}, o.attrs()...)...)
}
