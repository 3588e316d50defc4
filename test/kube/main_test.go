package kube_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the suite when a goroutine outlives it. The read loop of
// an HTTP/2 connection to the test cluster's API server is let go: with
// client-go v0.36 one such connection of the suite's own clients was seen
// open at the end of a whole run (all tests passing), and it is the
// suite's client, not the product's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}
