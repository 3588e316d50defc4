package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

// childEnv makes the test binary run as one process of a benchmark,
// started inside a namespace of the topology, where it makes all its
// sockets with no namespace switch: a provider in the proxy namespace, as
// the proxy runs its provider in its pod, or a client in the client's (see
// startChild).
const childEnv = "SLB_BENCH_CHILD"

// childProfileEnv is a path prefix for the CPU profiles of those processes
// (<prefix>.provider, <prefix>.client).
const childProfileEnv = "SLB_BENCH_CHILD_CPUPROFILE"

// childConfig is a provider serving one TCP service port with one
// endpoint, or (Client) a client that runs greetings on request.
type childConfig struct {
	Provider string
	Service  netip.AddrPort
	Endpoint netip.AddrPort
	Client   bool
}

func (c childConfig) role() string {
	if c.Client {
		return "client"
	}
	return "provider"
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

// runChild runs the process that raw configures: it says "ready" on
// stdout, serves until stdin ends and returns the exit code.
func runChild(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	if prefix := os.Getenv(childProfileEnv); prefix != "" {
		f, err := os.Create(prefix + "." + cfg.role())
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
	if cfg.Client {
		return runClient()
	}
	return runProvider(cfg)
}

func runProvider(cfg childConfig) int {
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

// runClient answers each line "<addr> <n>" of stdin with "ok" once it has
// made n greetings to addr, one after the other, each closed with a reset
// (slbtest's client code, in the process's own namespace).
func runClient() int {
	h := &slbtest.Host{Name: "client", NS: &testutil.NetNS{Handle: netns.None()}}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if err := greetings(h, sc.Text()); err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println("ok")
	}
	return 0
}

// greetings runs one request of runClient.
func greetings(h *slbtest.Host, req string) error {
	var addr string
	var n int
	if _, err := fmt.Sscan(req, &addr, &n); err != nil {
		return fmt.Errorf("request %q: %w", req, err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return err
	}
	for range n {
		if _, err := h.TCPHelloAbort(context.Background(), ap); err != nil {
			return err
		}
	}
	return nil
}

// child is a running benchmark process.
type child struct {
	in  io.WriteCloser
	out *bufio.Reader
}

// startChild runs the test binary as the process cfg describes (see
// runChild) in ns and waits until it is ready; it stops with b.
func startChild(b *testing.B, ns *testutil.NetNS, cfg childConfig) *child {
	b.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	// Forked from a thread inside ns, the child starts there.
	if err := ns.Do(cmd.Start); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("%s process: %v", cfg.role(), err)
		}
	})
	c := &child{in: in, out: bufio.NewReader(out)}
	if line, err := c.out.ReadString('\n'); line != "ready\n" {
		b.Fatalf("%s process not ready: %q, %v", cfg.role(), line, err)
	}
	return c
}

// hellos asks a client process for n greetings to addr and waits for them.
func (c *child) hellos(addr netip.AddrPort, n int) error {
	if _, err := fmt.Fprintf(c.in, "%s %d\n", addr, n); err != nil {
		return err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return fmt.Errorf("client process: %s", line)
	}
	return nil
}
