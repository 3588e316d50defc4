package labrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

// Lab is a lab run. The Lab returned by Up owns the run: it started the
// components' processes and can stop and start them. One returned by Open
// (another process) can only look at the run and tear it down.
type Lab struct {
	run   *topo.Run
	owner bool
	log   *slog.Logger
	out   io.Writer

	mu    sync.Mutex
	st    labState
	procs map[string]*proc // by component name, owner only

	stopControl func() // ends the control socket's server, owner only

	downOnce sync.Once
	downErr  error
}

// Binaries the lab runs.
var binaries = []string{"proxy", "ipam", "nsp", "lab"}

// Up builds a whole lab: namespaces and links, the nsp and ipam processes,
// the NSM control plane (in this process), the LBs, the proxy and the
// targets. It returns once the proxy's endpoint is registered; the targets
// connect in the background (Check tells when all is up). On error it tears
// down what it made.
func Up(ctx context.Context, opts Options) (_ *Lab, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("lab options: %w", err)
	}
	if err := checkBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	run, err := topo.NewRun(opts.RunBase)
	if err != nil {
		return nil, err
	}
	l := &Lab{run: run, owner: true, log: opts.Logger, out: opts.Stdout, procs: map[string]*proc{}}
	// Every return below sets the named err, which this clean-up reads.
	defer func() {
		if err != nil {
			if derr := l.Down(); derr != nil {
				l.log.Warn("tear down after failed start", "error", derr)
			}
		}
	}()
	if err := l.initState(opts); err != nil {
		return nil, err
	}
	if err := l.buildNetwork(); err != nil {
		return nil, err
	}
	if err := l.startServers(ctx); err != nil {
		return nil, err
	}
	if err := l.startComponents(); err != nil {
		return nil, err
	}
	if l.stopControl, err = l.serveControl(); err != nil {
		return nil, err
	}
	return l, nil
}

// checkBinaries checks that every binary the lab runs is in binDir.
func checkBinaries(binDir string) error {
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("lab binary %s not found in %s (make build): %w", b, binDir, err)
		}
	}
	return nil
}

// initState records the lab's options and owner in its state and saves it.
func (l *Lab) initState(opts Options) error {
	st, err := topo.ProcessStartTime(os.Getpid())
	if err != nil {
		return fmt.Errorf("own start time: %w", err)
	}
	l.st = labState{
		ID: l.run.ID(), BinDir: opts.BinDir,
		Trench: opts.Trench, Conduit: opts.Conduit, Namespace: opts.Namespace,
		VIPs: append([]string(nil), opts.VIPs...), LBs: append([]string(nil), opts.LBs...),
		ReleaseDelay: opts.ReleaseDelay.String(), IPAMPrefixIPv4: opts.IPAMPrefixIPv4, IPAMPrefixIPv6: opts.IPAMPrefixIPv6,
		EchoPort: opts.EchoPort, ServicePort: opts.ServicePort, ServiceProvider: opts.ServiceProvider, NSEExpiration: opts.NSEExpiration.String(), LogLevel: opts.LogLevel,
		TokenLifetime: opts.TokenLifetime.String(), IPAMEnv: append([]string(nil), opts.IPAMEnv...), ProxyEnv: append([]string(nil), opts.ProxyEnv...),
		OwnerPID: os.Getpid(), OwnerStartTime: st,
	}
	for i := range opts.Targets {
		l.st.Targets = append(l.st.Targets, fmt.Sprintf("target-%d", i+1))
	}
	if err := l.save(); err != nil {
		return err
	}
	l.progress("lab %s: run directory %s", l.run.ID(), l.run.Dir)
	return nil
}

// buildNetwork creates the namespaces and links of the ctl, proxy, ext, LB
// and target roles.
func (l *Lab) buildNetwork() error {
	for _, role := range []string{"ctl", "proxy", "ext"} {
		if _, err := l.run.AddNetNS(role); err != nil {
			return err
		}
	}
	if err := topo.AddVeth(
		topo.VethEnd{NetNSPath: l.NetNSPath("ctl"), Name: ctlIf, Addrs: []netip.Prefix{ctlAddr}},
		topo.VethEnd{NetNSPath: l.NetNSPath("proxy"), Name: proxyIf, Addrs: []netip.Prefix{proxyAddr}}); err != nil {
		return err
	}
	if err := l.setUpExt(); err != nil {
		return err
	}
	for i, name := range l.st.LBs {
		if err := l.addLBNetNS(i, name); err != nil {
			return err
		}
	}
	for _, name := range l.st.Targets {
		if err := l.addTargetNetNS(name); err != nil {
			return err
		}
	}
	l.progress("lab %s: namespaces %s", l.run.ID(), strings.Join(l.run.State().NetNS, " "))
	return nil
}

// setUpExt makes the ext namespace a router with its addresses on lo.
func (l *Lab) setUpExt() error {
	if err := topo.ApplySysctls(l.NetNSPath("ext"), topo.RouterSysctls); err != nil {
		return err
	}
	for _, a := range []netip.Addr{extV4, extV6} {
		args := []string{"ip", "addr", "add", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "lo"}
		if a.Is6() {
			args = append(args, "nodad")
		}
		if _, err := l.Exec("ext", args...); err != nil {
			return err
		}
	}
	return nil
}

// startServers writes the configuration and starts the configuration server
// and IPAM.
func (l *Lab) startServers(ctx context.Context) error {
	if err := l.writeNSPConfig(l.st.VIPs); err != nil {
		return err
	}
	if l.st.ServicePort != 0 {
		if err := l.WriteRawServices(l.servicesYAML()); err != nil {
			return err
		}
	}
	if err := l.startNSP(ctx); err != nil {
		return err
	}
	if err := l.StartIPAM(); err != nil {
		return err
	}
	l.progress("lab %s: nsp and ipam serving on %s", l.run.ID(), ctlAddr.Addr())
	return nil
}

// startComponents starts the NSM control plane, the LBs, the proxy and the
// targets, in that order.
func (l *Lab) startComponents() error {
	if err := l.startNSM(); err != nil {
		return fmt.Errorf("nsm control plane: %w", err)
	}
	l.progress("lab %s: NSMgr on %s", l.run.ID(), l.nsmgrURL())
	for _, name := range l.st.LBs {
		if err := l.startLBProcess(name); err != nil {
			return err
		}
	}
	if err := l.syncExtRoutes(); err != nil {
		return err
	}
	if err := l.StartProxy(); err != nil {
		return err
	}
	l.progress("lab %s: proxy registered; %d LBs, starting %d targets", l.run.ID(), len(l.st.LBs), len(l.st.Targets))
	for _, name := range l.st.Targets {
		if err := l.startTargetProcess(name, ""); err != nil {
			return err
		}
	}
	return nil
}

// Open returns the run id under runBase (default topo.DefaultBase; the
// latest run when id is empty) as recorded on disk, for Status and Down from
// another process.
func Open(runBase, id string) (*Lab, error) {
	if id == "" {
		var err error
		if id, err = Latest(runBase); err != nil {
			return nil, err
		}
	}
	run, err := topo.OpenRun(runBase, id)
	if err != nil {
		return nil, err
	}
	st, err := loadState(run.Dir)
	if err != nil {
		return nil, err
	}
	// What it logs (Down: the processes it found without a record) is for
	// the user of `lab down`.
	return &Lab{run: run, st: st, log: slog.Default(), out: io.Discard}, nil
}

func (l *Lab) progress(format string, args ...any) {
	fmt.Fprintf(l.out, format+"\n", args...)
	l.log.Info(fmt.Sprintf(format, args...))
}

func (l *Lab) save() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return saveState(l.run.Dir, l.st)
}

func (l *Lab) state() labState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.clone()
}

// ID is the run id.
func (l *Lab) ID() string { return l.run.ID() }

// RunDir is the run directory.
func (l *Lab) RunDir() string { return l.run.Dir }

// NetNS is the namespace name of role: "ctl", "proxy", "ext", an LB name or
// a target name.
func (l *Lab) NetNS(role string) string { return l.run.NetNSName(role) }

// NetNSPath is the bind-mount path of the namespace of role.
func (l *Lab) NetNSPath(role string) string { return topo.NetNSPath(l.NetNS(role)) }

// Targets are the targets' names.
func (l *Lab) Targets() []string { return l.state().Targets }

// LBs are the load balancers' names.
func (l *Lab) LBs() []string { return l.state().LBs }

// ExtAddrs are the external host's client addresses (IPv4, IPv6).
func (l *Lab) ExtAddrs() []netip.Addr { return []netip.Addr{extV4, extV6} }

// VIPs are the current VIPs.
func (l *Lab) VIPs() []netip.Prefix {
	vips, _ := parseVIPs(l.state().VIPs)
	return vips
}

// EchoPort is the targets' TCP and UDP echo port on the VIPs.
func (l *Lab) EchoPort() int { return l.state().EchoPort }

// LBExtAddrs are the addresses of the LB's link toward the external host
// (IPv4, IPv6): the external host's gateways through that LB.
func (l *Lab) LBExtAddrs(name string) []netip.Addr {
	i := slices.Index(l.state().LBs, name)
	if i < 0 {
		return nil
	}
	k := linkOf(i)
	return []netip.Addr{k.LB4.Addr(), k.LB6.Addr()}
}

// Logs is the path of a component's log file ("proxy", "ipam", "nsp", an LB
// or a target name).
func (l *Lab) Logs(component string) string {
	return filepath.Join(l.LogDir(), component+".log")
}

// LogDir is the directory of the components' logs, <run base>/logs/<id>:
// it stays after Down (the last topo.KeptLogs runs of the base keep theirs).
func (l *Lab) LogDir() string { return l.run.LogDir() }

// ExtLinkOf is the external host's link toward the LB (empty for an
// unknown LB): the interface an egress flow through it arrives on.
func (l *Lab) ExtLinkOf(lb string) string {
	i := slices.Index(l.LBs(), lb)
	if i < 0 {
		return ""
	}
	return linkOf(i).ExtIf
}

// ProxyHealthSocket is the proxy's NSM_HEALTH_SOCKET (`proxy -probe`
// asks it).
func (l *Lab) ProxyHealthSocket() string { return l.run.Path("proxy-health.sock") }

// ProxyDebugSocket is the proxy's NSM_DEBUG_SOCKET.
func (l *Lab) ProxyDebugSocket() string { return l.run.Path("proxy-debug.sock") }

// ProxyDebug is what `proxy -debug` prints: the running proxy's state as JSON.
func (l *Lab) ProxyDebug(ctx context.Context) ([]byte, error) {
	var b strings.Builder
	if err := proxyd.PrintDebug(ctx, l.ProxyDebugSocket(), &b); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// TargetsDir is the publication directory of the targets (see targetaddrs).
func (l *Lab) TargetsDir() string { return l.run.Path("targets") }

// TargetAddrs are the addresses the proxy handed out to the target, as it
// published them, with the prefix length of its NSM interface.
func (l *Lab) TargetAddrs(name string) []netip.Prefix {
	pubs, err := targetaddrs.Read(l.TargetsDir())
	if err != nil {
		return nil
	}
	onIf, _ := linkPrefixes(l.NetNSPath(name), nsmIf)
	var out []netip.Prefix
	for _, a := range pubs[name] {
		p := netip.PrefixFrom(a, a.BitLen())
		for _, q := range onIf {
			if q.Addr() == a {
				p = q
			}
		}
		out = append(out, p)
	}
	return out
}

// Exec runs a command in the namespace of role and returns its combined
// output.
func (l *Lab) Exec(role string, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("exec: no command")
	}
	out, err := exec.Command("ip", append([]string{"netns", "exec", l.NetNS(role)}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), l.NetNS(role), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Down removes every namespace, link, process and file of the run but its
// logs (LogDir, see topo.Run.Down). For a
// lab opened from another process whose owner still runs, it asks the
// owner to stop (SIGTERM) and waits for it, then removes whatever is left:
// also a component process that the owner started but did not record (it
// crashed in between), found by the run's marker (see topo.MarkerEnv).
// Running it again is harmless.
func (l *Lab) Down() error {
	l.downOnce.Do(func() {
		l.run.Log = l.log
		if l.owner {
			l.downErr = l.downOwned()
		} else {
			l.downErr = l.downOther()
		}
		if exists(l.LogDir()) {
			l.log.Info("lab down; its logs stay", "lab", l.ID(), "logs", l.LogDir())
		}
	})
	return l.downErr
}

func (l *Lab) downOwned() error {
	if l.stopControl != nil {
		l.stopControl()
	}
	// Targets leave first (they close their connections through the
	// control plane), then the proxy and the LBs, then ipam and nsp.
	l.stopAll(l.state().Targets, 10*time.Second)
	l.stopAll(append([]string{"proxy"}, l.state().LBs...), 10*time.Second)
	l.stopAll([]string{"nsm", "ipam", "nsp"}, 10*time.Second)
	err := l.run.Down(2 * time.Second)
	l.mu.Lock()
	procs := l.procs
	l.mu.Unlock()
	for _, p := range procs {
		<-p.done
	}
	return err
}

func (l *Lab) downOther() error {
	st := l.st
	if st.OwnerPID != os.Getpid() && topo.Alive(st.OwnerPID, st.OwnerStartTime) {
		_ = topo.Signal(st.OwnerPID, st.OwnerStartTime, syscall.SIGTERM)
		deadline := time.Now().Add(90 * time.Second)
		for topo.Alive(st.OwnerPID, st.OwnerStartTime) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if topo.Alive(st.OwnerPID, st.OwnerStartTime) {
			_ = topo.Signal(st.OwnerPID, st.OwnerStartTime, syscall.SIGKILL)
			// Gone, it starts nothing more that the search for the
			// run's processes below would miss.
			deadline = time.Now().Add(5 * time.Second)
			for topo.Alive(st.OwnerPID, st.OwnerStartTime) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if _, err := os.Stat(l.run.Dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return l.run.Down(5 * time.Second)
}
