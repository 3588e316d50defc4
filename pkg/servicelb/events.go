package servicelb

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
)

// EventReason says what happened to a connection or flow of a service port.
type EventReason string

// The reasons sockets report.
const (
	EventEndpointChosen EventReason = "EndpointChosen"
	EventDialFailed     EventReason = "DialFailed"
	EventNoEndpoints    EventReason = "NoEndpoints"
	EventClientsFull    EventReason = "ClientsFull" // a UDP flow refused: client sockets at their bound
	EventReadError      EventReason = "ReadError"   // a socket read failed; the port keeps serving
)

// Event is one thing that happened on a service port, with its reference.
type Event struct {
	Ref      Reference
	Service  ServicePortName
	Reason   EventReason
	Client   netip.AddrPort
	Endpoint netip.AddrPort
	Err      error
}

// Recorder receives the events of sockets and providers. It must be safe for
// concurrent use.
type Recorder interface {
	Record(Event)
}

// LogRecorder logs every event (EndpointChosen at debug level, the others as
// warnings) and counts them per service reference and reason.
type LogRecorder struct {
	log *slog.Logger

	mu     sync.Mutex
	counts map[eventKey]uint64
}

type eventKey struct {
	ref    Reference
	reason EventReason
}

// NewLogRecorder returns a recorder that logs to log (slog.Default if nil).
func NewLogRecorder(log *slog.Logger) *LogRecorder {
	if log == nil {
		log = slog.Default()
	}
	return &LogRecorder{log: log, counts: make(map[eventKey]uint64)}
}

// Record logs and counts e.
func (r *LogRecorder) Record(e Event) {
	r.mu.Lock()
	r.counts[eventKey{e.Ref, e.Reason}]++
	r.mu.Unlock()
	level := slog.LevelWarn
	if e.Reason == EventEndpointChosen {
		level = slog.LevelDebug
	}
	if !r.log.Enabled(context.Background(), level) {
		return // one EndpointChosen per connection: build nothing unlogged
	}
	attrs := []any{"service", e.Service.String(), "ref", e.Ref.String(), "reason", string(e.Reason)}
	if e.Client.IsValid() {
		attrs = append(attrs, "client", e.Client.String())
	}
	if e.Endpoint.IsValid() {
		attrs = append(attrs, "endpoint", e.Endpoint.String())
	}
	if e.Err != nil {
		attrs = append(attrs, "error", e.Err.Error())
	}
	r.log.Log(context.Background(), level, "service event", attrs...)
}

// Count returns how many events of reason were recorded for ref.
func (r *LogRecorder) Count(ref Reference, reason EventReason) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[eventKey{ref, reason}]
}
