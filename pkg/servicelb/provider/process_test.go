package provider

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

// childEnv makes the test binary serve one provider as a process of its
// own, started inside the proxy namespace, as the proxy runs its provider
// in its pod: no namespace switch on any socket call (see
// startProviderProcess).
const childEnv = "SLB_BENCH_PROVIDER_CHILD"

// childProfileEnv names a file for the CPU profile of that process.
const childProfileEnv = "SLB_BENCH_CHILD_CPUPROFILE"

// childConfig is one TCP service port with one endpoint.
type childConfig struct {
	Provider string
	Service  netip.AddrPort
	Endpoint netip.AddrPort
}

// serveOne gives p the service port svc with the one endpoint ep and
// syncs.
func serveOne(p servicelb.Provider, name string, svc, ep netip.AddrPort) error {
	p.OnEndpointsUpdate([]servicelb.Endpoints{{Namespace: "bench", Name: name,
		Ports: []servicelb.EndpointPort{{Name: "p", Addresses: []netip.AddrPort{ep}}}}})
	p.OnServiceUpdate([]servicelb.Service{{Ref: servicelb.Reference{Namespace: "bench", Name: name}, IP: svc.Addr(),
		Ports: []servicelb.ServicePort{{Name: "p", Port: svc.Port(), Protocol: servicelb.TCP}}}})
	return p.(interface{ SyncNow() error }).SyncNow()
}

// runChild serves cfg in the process's own namespace, says "ready" on
// stdout and stops when stdin ends; it returns the exit code.
func runChild(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	if path := os.Getenv(childProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	p, err := New(Config{Provider: cfg.Provider, Logger: slbtest.Logger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer p.Close()
	if err := serveOne(p, cfg.Provider, cfg.Service, cfg.Endpoint); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// startProviderProcess runs the test binary as a provider process (see
// runChild) in ns; it stops with b.
func startProviderProcess(b *testing.B, ns *testutil.NetNS, cfg childConfig) {
	b.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	// The child is forked from a thread inside ns, so it starts there.
	if err := ns.Do(cmd.Start); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("provider process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		b.Fatalf("provider process not ready: %q, %v", line, err)
	}
}
