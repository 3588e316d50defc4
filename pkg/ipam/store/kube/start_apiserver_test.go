//go:build apiserver

package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// records100k is a trench of 100,000 addresses: 4 conduits of 100 node
// subnets (/24) of 250 addresses each, with their leases.
func records100k(trench string, now time.Time) []store.Op {
	put := func(r store.Record) store.Op { return store.Op{Kind: store.OpPut, Record: r} }
	ops := []store.Op{put(store.Record{
		Key:    store.Key{Level: store.LevelTrench, Trench: trench, Family: 4},
		Prefix: netip.MustParsePrefix("10.0.0.0/8"), Updated: now, ConduitLength: 12, NodeLength: 24,
	})}
	for c := range 4 {
		conduit := fmt.Sprintf("conduit-%d", c)
		ck := store.Key{Level: store.LevelConduit, Trench: trench, Family: 4, Conduit: conduit}
		ops = append(ops, put(store.Record{Key: ck, Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(16 * c), 0, 0}), 12)}))
		for n := range 100 {
			nk := ck
			nk.Level, nk.Node = store.LevelNode, fmt.Sprintf("worker-%d", n)
			ops = append(ops, put(store.Record{Key: nk, Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(16 * c), byte(n), 0}), 24), Updated: now}))
			for a := 1; a <= 250; a++ {
				k := nk
				k.Level, k.Child = store.LevelChild, fmt.Sprintf("target-%d-%d-%d-src", c, n, a)
				ops = append(ops, put(store.Record{Key: k, Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(16 * c), byte(n), byte(a)}), 32), Updated: now}))
			}
		}
	}
	return ops
}

// heap returns the bytes in use on the heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// samplePeak samples the heap in use every 5 ms until the returned
// function is called, which returns the highest sample.
func samplePeak() func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapAlloc)
			select {
			case <-stop:
				done <- top
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}

// A replica's start on a store of 100,000 addresses (the figure):
// the time from Open (reading every object, the claim written) to an
// engine serving, and the memory the store and engine hold then.
func TestFiguresStartWith100kRecords(t *testing.T) {
	_, client := realAPI(t)
	ctx := context.Background()
	ops := records100k("big", time.Now())
	w, err := Open(ctx, Options{Client: client, Namespace: "default", Trench: "big", Identity: "writer", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, w.Apply(ctx, ops))
	wrote := time.Since(start)
	require.NoError(t, w.Close())
	ops = nil

	before := heap()
	peak := samplePeak()
	start = time.Now()
	st, err := Open(ctx, Options{Client: client, Namespace: "default", Trench: "big", Identity: "replica", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	opened := time.Since(start)
	e, err := ipam.New(ctx, st, ipam.Config{
		Trench: "big", IPv4: &ipam.FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/8"), ConduitLength: 12, NodeLength: 24},
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	loaded := time.Since(start)
	top := peak() - before
	held := heap() - before
	// Served: the last address of the last node is there, and a new one
	// goes after it.
	p, err := e.Allocate(ctx, ipam.Subnet{Trench: "big", Conduit: "conduit-3", Node: "worker-99", Family: ipam.IPv4}, "target-3-99-250-src")
	require.NoError(t, err)
	require.Equal(t, "10.48.99.250/24", p.String())
	fmt.Printf("FIGURE: IPAM Kubernetes store, 100,000 addresses (400 IPAMBlocks): written in %s; a replica's start, objects read and claim written %s, engine serving %s after Open began\n",
		wrote.Round(time.Millisecond), opened.Round(time.Millisecond), loaded.Round(time.Millisecond))
	fmt.Printf("FIGURE: IPAM replica memory with 100,000 addresses on the Kubernetes store (store cache and engine, Go heap after GC): %.0f MiB; peak during the start %.0f MiB\n",
		float64(held)/(1<<20), float64(top)/(1<<20))
	e.Close()
	require.NoError(t, st.Close())
}
