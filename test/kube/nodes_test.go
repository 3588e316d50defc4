package kube_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// nodesRun is where the test cluster keeps what it knows of each node
// (scripts/cluster/lib.sh): a directory per node, named after it, with the
// pid of the process that holds the node's network and mount namespaces
// (node.pid) and its containerd's socket. Each node's processes and pods
// live in those namespaces; the suite, on the host, reaches them through
// the holder.
const nodesRun = "/run/causeway-cluster/nodes"

// clusterNodes returns the names of the cluster's nodes, sorted.
func clusterNodes(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(nodesRun)
	if err != nil {
		t.Fatalf("the cluster's nodes: %v", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("the cluster has no node in %s", nodesRun)
	}
	slices.Sort(names)
	return names
}

// containerdSock returns the socket of node's containerd.
func containerdSock(node string) string {
	return filepath.Join(nodesRun, node, "containerd", "containerd.sock")
}

// nodePID returns the pid of the process that holds node's namespaces.
func nodePID(t *testing.T, node string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(nodesRun, node, "node.pid"))
	if err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("node %s: pid %q: %v", node, b, err)
	}
	return pid
}

// nodeNetNS returns the path of node's network namespace.
func nodeNetNS(t *testing.T, node string) string {
	t.Helper()
	return fmt.Sprintf("/proc/%d/ns/net", nodePID(t, node))
}

// nodePath returns where the host sees path of node's mount namespace.
func nodePath(t *testing.T, node, path string) string {
	t.Helper()
	return fmt.Sprintf("/proc/%d/root%s", nodePID(t, node), path)
}

// nodeDialer returns a dial function whose sockets are opened in node's
// network namespace, as a process of the node would open them.
func nodeDialer(t *testing.T, node string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	path := nodeNetNS(t, node)
	return func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
		err = netnsdo.DoPath(path, func() error {
			var d net.Dialer
			conn, err = d.DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
}
