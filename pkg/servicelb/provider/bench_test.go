package provider

import (
	"context"
	"io"
	"net/netip"
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

// benchEnv is one endpoint behind both providers (each on its own service
// IP, in the same proxy namespace) and reachable directly over the bridge:
// the three paths share everything but the load balancer.
func benchEnv(b *testing.B) (*slbtest.Topology, []benchPath) {
	topo := slbtest.New(b, 1)
	echo := slbtest.StartEcho(b, topo.Endpoints)
	ep := netip.AddrPortFrom(topo.Endpoints[0].Addr4, echo.Port)
	paths := []benchPath{{name: "direct", addr: ep}}
	for i, name := range []string{servicelb.ProviderUserspace, servicelb.ProviderNftables} {
		p, err := New(Config{Provider: name, NetNS: topo.Proxy.Handle, BridgeNetfilter: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		svc := netip.AddrFrom4([4]byte{10, 96, 1, byte(10 + i)})
		p.OnEndpointsUpdate([]servicelb.Endpoints{{Namespace: "bench", Name: name,
			Ports: []servicelb.EndpointPort{{Name: "p", Addresses: []netip.AddrPort{ep}}}}})
		p.OnServiceUpdate([]servicelb.Service{{Ref: servicelb.Reference{Namespace: "bench", Name: name}, IP: svc,
			Ports: []servicelb.ServicePort{{Name: "p", Port: 80, Protocol: servicelb.TCP}}}})
		if err := p.(interface{ SyncNow() error }).SyncNow(); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, benchPath{name: name, addr: netip.AddrPortFrom(svc, 80)})
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

// BenchmarkTCPConnRate opens, greets and closes connections one after the
// other.
func BenchmarkTCPConnRate(b *testing.B) {
	topo, paths := benchEnv(b)
	res := make(map[string]float64)
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			ctx := context.Background()
			for range b.N {
				if _, err := topo.Client.TCPHelloAbort(ctx, p.addr); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			res[p.name] = float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(res[p.name], "conn/s")
		})
	}
	ratios(b, "TCP connections", "conn/s", res)
}
