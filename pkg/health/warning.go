package health

import (
	"context"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// WarningHeader is the metadata key of a Check answer that carries the
// probe's warnings, one value each ("Subservice: text").
const WarningHeader = "causeway-health-warning"

// RegisterWarning adds warning subservices to a probe: their failure never
// changes the probe's state, it only adds their text to the probe's
// warnings. A subservice not seen before starts serving (no warning). Set
// them with SetWarning.
func (c *Checker) RegisterWarning(probe string, subservices ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.register(probe, c.warnings, true, subservices)
}

// SetWarning sets a warning subservice: text empty, it serves; otherwise it
// is NOT_SERVING (asked by its own name) and text says why in the warnings
// of the probes it warns. The probes' states do not change, unless the
// subservice is also a subservice of a probe (Register), which then follows
// it as it follows SetServing.
func (c *Checker) SetWarning(subservice, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.settable(subservice) {
		return
	}
	if prev, known := c.texts[subservice]; known && prev == text {
		return
	}
	c.texts[subservice] = text
	c.log.Debug("health: warning", "subservice", subservice, "text", text)
	c.setLocked(subservice, text == "")
}

// Warnings returns the warnings of a probe, "Subservice: text" for each of
// its warning subservices that fails, in registration order.
func (c *Checker) Warnings(probe string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.warnings[probe] {
		if t := c.texts[s]; t != "" {
			out = append(out, s+": "+t)
		}
	}
	return out
}

// warningServer is the health service whose Check answers carry the
// warnings of the service asked (a probe's; none for another service).
type warningServer struct {
	healthpb.HealthServer
	c *Checker
}

func (s warningServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := s.HealthServer.Check(ctx, req)
	if err != nil {
		return resp, err
	}
	if w := s.c.Warnings(req.GetService()); len(w) > 0 {
		md := metadata.MD{}
		md.Append(WarningHeader, w...)
		if err := grpc.SetHeader(ctx, md); err != nil {
			s.c.log.Debug("health: warning header", "error", err)
		}
	}
	return resp, nil
}
