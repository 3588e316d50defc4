// Command probe checks a pod's view of the cluster: by default it resolves a
// name through the pod's resolver and opens a TCP connection to it; with
// -svid it fetches the pod's X.509 SVID from the SPIRE agent's Workload API
// and prints its SPIFFE ID; with -write it creates a file; with -ipam (and
// -svid) it calls the IPAM at that address under the pod's SVID, once per
// -call, and prints each call's gRPC code. It exits 0 only if the check
// works (with -ipam: every call was made, whatever its answer). The
// Kubernetes suite runs it as a pod (image built by scripts/cluster/images.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

func main() {
	name := flag.String("name", "kubernetes.default.svc.cluster.local", "the name to resolve")
	port := flag.String("port", "443", "the TCP port to connect to")
	svid := flag.String("svid", "", "the Workload API's address (unix:///...): fetch an SVID instead")
	write := flag.String("write", "", "a file to create: check that the pod may write there instead")
	timeout := flag.Duration("timeout", 30*time.Second, "how long the check may take")
	ipam := flag.String("ipam", "", "the IPAM's address (host:port): make the -call calls under the SVID of -svid")
	var calls ipamCalls
	flag.Var(&calls, "call", "an IPAM call: allocate|release:<trench>:<conduit>:<node>:<child> (repeatable)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	check := func() error { return connect(ctx, *name, *port) }
	if *svid != "" {
		check = func() error { return fetchSVID(ctx, *svid) }
	}
	if *ipam != "" {
		check = func() error { return callIPAM(ctx, *svid, *ipam, calls) }
	}
	if *write != "" {
		check = func() error { return os.WriteFile(*write, []byte("probe\n"), 0o640) }
	}
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func connect(ctx context.Context, name, port string) error {
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", name, err)
	}
	fmt.Printf("resolved %s: %v\n", name, addrs)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0], port))
	if err != nil {
		return fmt.Errorf("connect %s: %w", name, err)
	}
	fmt.Printf("connected %s -> %s\n", conn.LocalAddr(), conn.RemoteAddr())
	return conn.Close()
}

// fetchSVID waits, as a workload does, for the Workload API to issue the
// pod's SVID (an agent learns a new registration at its next sync).
func fetchSVID(ctx context.Context, addr string) error {
	src, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(addr)))
	if err != nil {
		return fmt.Errorf("SVID from %s: %w", addr, err)
	}
	defer src.Close()
	svid, err := src.GetX509SVID()
	if err != nil {
		return fmt.Errorf("SVID from %s: %w", addr, err)
	}
	fmt.Printf("svid %s\n", svid.ID)
	return nil
}
