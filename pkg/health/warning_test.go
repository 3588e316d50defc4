package health

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failing warning subservice keeps its probe serving, and the probe's
// answers name it; it clears without a trace.
func TestWarningKeepsProbeServing(t *testing.T) {
	c := New(WithLogger(quiet))
	hc, path := serveUnix(t, c)
	c.Register(Readiness, IPAMCli)
	c.RegisterWarning(Readiness, Datapath)
	c.Register(Liveness, NSMEndpoint)
	c.SetServing(IPAMCli, true)
	c.SetServing(NSMEndpoint, true)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	assert.Equal(t, "SERVING", check(t, hc, Datapath), "a warning starts clear")
	w, err := Probe(ctx, path, "readiness")
	require.NoError(t, err)
	assert.Empty(t, w)

	c.SetWarning(Datapath, "nexthop 172.16.0.3 down")
	assert.Equal(t, "SERVING", check(t, hc, Readiness), "a warning is no failure")
	assert.Equal(t, "SERVING", check(t, hc, Liveness))
	assert.Equal(t, "NOT_SERVING", check(t, hc, Datapath), "asked by its name, it fails")
	w, err = Probe(ctx, path, "readiness")
	require.NoError(t, err)
	assert.Equal(t, []string{"Datapath: nexthop 172.16.0.3 down"}, w)
	w, err = Probe(ctx, path, "liveness")
	require.NoError(t, err)
	assert.Empty(t, w, "a warning of Readiness only")

	c.SetWarning(Datapath, "nexthop 172.16.0.3 down, nexthop 172.16.0.4 down")
	assert.Equal(t, []string{"Datapath: nexthop 172.16.0.3 down, nexthop 172.16.0.4 down"}, c.Warnings(Readiness))

	// A probe that fails says its warnings too.
	c.SetServing(IPAMCli, false)
	_, err = Probe(ctx, path, "readiness", IPAMCli)
	require.EqualError(t, err, "Readiness probe on "+path+": NOT_SERVING (not serving: IPAMCli); warning: Datapath: nexthop 172.16.0.3 down, nexthop 172.16.0.4 down")

	c.SetServing(IPAMCli, true)
	c.SetWarning(Datapath, "")
	assert.Equal(t, "SERVING", check(t, hc, Datapath))
	w, err = Probe(ctx, path, "readiness")
	require.NoError(t, err)
	assert.Empty(t, w)
}

// The Watch of a probe follows its subservices, not its warnings.
func TestWarningIsNoProbeChange(t *testing.T) {
	c := New(WithLogger(quiet))
	hc, _ := serveUnix(t, c)
	c.RegisterWarning(Readiness, Datapath)
	next := watchProbe(t, hc, Readiness)
	require.Equal(t, "SERVING", next())
	c.SetWarning(Datapath, "nexthop 172.16.0.3 down")
	c.Register(Readiness, IPAMCli)
	require.Equal(t, "NOT_SERVING", next(), "IPAMCli registered")
	c.SetServing(IPAMCli, true)
	require.Equal(t, "SERVING", next(), "serving with the warning still on")
}

// A subservice that is a warning of one probe and a subservice of another
// fails the other.
func TestWarningAlsoASubservice(t *testing.T) {
	c := New(WithLogger(quiet))
	c.RegisterWarning(Readiness, Datapath)
	c.Register("Strict", Datapath)
	c.SetWarning(Datapath, "")
	c.mu.Lock()
	assert.True(t, c.probeOK["Strict"])
	c.mu.Unlock()
	c.SetWarning(Datapath, "target 172.16.1.9 not answering")
	c.mu.Lock()
	assert.False(t, c.probeOK["Strict"])
	assert.True(t, c.probeOK[Readiness])
	c.mu.Unlock()
	c.RegisterWarning(Datapath, IPAMCli) // a subservice is no probe
	assert.Empty(t, c.Warnings(Datapath))
}
