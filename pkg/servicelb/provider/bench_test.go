package provider

import (
	"context"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

// benchPath is one way from the client to the echo endpoint.
type benchPath struct {
	name string
	addr netip.AddrPort
}

// inProcessEnv runs the userspace provider inside the benchmark process,
// in the proxy namespace as seen from there: each dial to the endpoint then
// switches its thread's namespace (netnsdo.Do), which the proxy, running
// the provider in its own namespace, never does. For comparison only.
const inProcessEnv = "SLB_BENCH_USERSPACE_IN_PROCESS"

// benchEnv is one endpoint behind both providers (each on its own service
// IP, in the same proxy namespace) and reachable directly over the bridge:
// the three paths share everything but the load balancer. The userspace
// provider runs as a process of its own inside the proxy namespace, as in
// the proxy's pod (unless inProcessEnv is set); the nftables provider only
// programs the kernel, so it stays in the benchmark process.
func benchEnv(b *testing.B) (*slbtest.Topology, []benchPath) {
	topo := slbtest.New(b, 1)
	topo.BridgeNetfilter(b)
	echo := slbtest.StartEcho(b, topo.Endpoints)
	ep := netip.AddrPortFrom(topo.Endpoints[0].Addr4, echo.Port)
	paths := []benchPath{{name: "direct", addr: ep}}
	for i, name := range []string{servicelb.ProviderUserspace, servicelb.ProviderNftables} {
		svc := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, 1, byte(10 + i)}), 80)
		paths = append(paths, benchPath{name: name, addr: svc})
		if name == servicelb.ProviderUserspace && os.Getenv(inProcessEnv) == "" {
			startChild(b, topo.Proxy, childConfig{Provider: name, Service: svc, Endpoint: ep})
			continue
		}
		p, err := New(Config{Provider: name, NetNS: topo.Proxy.Handle})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		if err := serveOne(p, name, svc, ep); err != nil {
			b.Fatal(err)
		}
	}
	return topo, paths
}

func ratios(b *testing.B, what, unit string, res map[string]float64) {
	d := res["direct"]
	if d == 0 {
		return
	}
	b.Logf("FIGURE: %s direct %.1f %s; userspace %.1f (%.2f of direct); nftables %.1f (%.2f of direct)", what,
		d, unit, res[servicelb.ProviderUserspace], res[servicelb.ProviderUserspace]/d,
		res[servicelb.ProviderNftables], res[servicelb.ProviderNftables]/d)
}

// BenchmarkTCPThroughput streams through one connection per path; the echo
// endpoint sends everything back, the client drains it.
func BenchmarkTCPThroughput(b *testing.B) {
	topo, paths := benchEnv(b)
	res := make(map[string]float64)
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := topo.Client.DialTCP(ctx, p.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				_, _ = io.Copy(io.Discard, c)
			}()
			buf := make([]byte, 128<<10)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			_ = c.CloseWrite()
			<-drained
			b.StopTimer()
			res[p.name] = float64(b.N*len(buf)) / b.Elapsed().Seconds() / 1e6
		})
	}
	ratios(b, "TCP throughput", "MB/s", res)
}

// clientInProcessEnv makes the connection-rate client run in the benchmark
// process, switching a thread into the client namespace for each dial
// (netnsdo.Do), as in the first version of the benchmark. For comparison
// only.
const clientInProcessEnv = "SLB_BENCH_CLIENT_IN_PROCESS"

// connBlock is how many connections in a row take one path: the paths
// take turns in blocks short enough that all see the same load of a
// shared machine, long enough that each runs warm.
const connBlock = 50

// BenchmarkTCPConnRate opens, greets and closes connections one after the
// other from a client process in the client namespace (see startChild),
// taking the paths in turns of connBlock connections; one op is one such
// block. It reports each path's connections per second.
func BenchmarkTCPConnRate(b *testing.B) {
	topo, paths := benchEnv(b)
	hellos := func(addr netip.AddrPort, n int) error {
		for range n {
			if _, err := topo.Client.TCPHelloAbort(context.Background(), addr); err != nil {
				return err
			}
		}
		return nil
	}
	if os.Getenv(clientInProcessEnv) == "" {
		hellos = startChild(b, topo.Client.NS, childConfig{Client: true}).hellos
	}
	spent := make([]time.Duration, len(paths))
	conns := make([]int, len(paths))
	for i := 0; b.Loop(); i++ {
		k := i % len(paths)
		start := time.Now()
		if err := hellos(paths[k].addr, connBlock); err != nil {
			b.Fatalf("%s: %v", paths[k].name, err)
		}
		spent[k] += time.Since(start)
		conns[k] += connBlock
	}
	res := make(map[string]float64)
	for k, p := range paths {
		if conns[k] > 0 {
			res[p.name] = float64(conns[k]) / spent[k].Seconds()
			b.ReportMetric(res[p.name], p.name+"-conn/s")
		}
	}
	ratios(b, "TCP connections", "conn/s", res)
}
