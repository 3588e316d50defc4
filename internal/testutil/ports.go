package testutil

import (
	"net"
	"testing"
)

// FreePorts returns n distinct TCP ports of 127.0.0.1 that were free a
// moment ago. All n are held open until the last is picked, so the kernel
// cannot hand the same port out twice (two single picks can collide).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
