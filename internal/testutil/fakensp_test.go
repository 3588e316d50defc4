package testutil

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
)

func TestFakeNSPScriptsWatches(t *testing.T) {
	f, s := ServeFakeNSP(t, "", 1)
	c := nspv1.NewConfigurationManagerClient(s.Dial(t))
	ctx := t.Context()

	failed, err := c.WatchConduit(ctx, &nspv1.Conduit{Trench: &nspv1.Trench{Name: "red"}})
	if err == nil {
		_, err = failed.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("first watch: %v, want Unavailable", err)
	}
	if got := (<-f.ConduitWatches).GetTrench().GetName(); got != "red" {
		t.Fatalf("filter trench %q", got)
	}

	w, err := c.WatchConduit(ctx, &nspv1.Conduit{})
	if err != nil {
		t.Fatal(err)
	}
	f.Conduits <- ConduitList("red", "a", "b")
	r, err := w.Recv()
	if err != nil || len(r.GetConduits()) != 2 || r.GetConduits()[1].GetName() != "b" || r.GetConduits()[0].GetTrench().GetName() != "red" {
		t.Fatalf("Recv = %v, %v", r, err)
	}
	f.Conduits <- nil
	if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after a nil response: %v, want Unavailable", err)
	}
	if f.Calls() != 2 {
		t.Fatalf("%d watches counted, want 2", f.Calls())
	}
}
