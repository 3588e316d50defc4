// Command probe checks a pod's view of the cluster's services: it resolves a
// name through the pod's resolver and opens a TCP connection to it, and
// exits 0 only if both work. The Kubernetes suite runs it as a pod (image
// built by scripts/cluster/images.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	name := flag.String("name", "kubernetes.default.svc.cluster.local", "the name to resolve")
	port := flag.String("port", "443", "the TCP port to connect to")
	flag.Parse()
	if err := probe(*name, *port); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func probe(name, port string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
