package kube

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A block's leases are one string per child and read back the same: a
// single address without its length, any other prefix with it, a lease
// never renewed without a time. A block written by an earlier version
// (a list of children) is read too.
func TestBlockEncoding(t *testing.T) {
	b := &block{name: "blue-ipv4-172-16-0-0-24", family: 4, id: nodeID{"c", "w1"}, prefix: netip.MustParsePrefix("172.16.0.0/24"), renewed: t0,
		children: map[string]lease{
			"a":   {prefix: netip.MustParsePrefix("172.16.0.5/32"), renewed: t0},
			"b c": {prefix: netip.MustParsePrefix("172.16.0.8/30"), renewed: t0.Add(time.Second)},
			"d":   {prefix: netip.MustParsePrefix("172.16.0.9/32")},
		}}
	u := b.object(ns, "blue")
	leases := u.Object["spec"].(map[string]any)["leases"]
	assert.Equal(t, map[string]any{
		"a": "172.16.0.5 2026-12-06T05:00:00.123456789Z", "b c": "172.16.0.8/30 2026-12-06T05:00:01.123456789Z", "d": "172.16.0.9",
	}, leases)
	u.SetResourceVersion("7")
	got, trench, err := decodeBlock(u.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, "blue", trench)
	assert.Equal(t, b.children, got.children)
	assert.Equal(t, b.id, got.id)
	assert.True(t, got.renewed.Equal(t0))

	six := lease{prefix: netip.MustParsePrefix("fd00::5/128"), renewed: t0}
	l, err := parseLease(formatLease(six))
	require.NoError(t, err)
	assert.Equal(t, six.prefix, l.prefix)
	assert.True(t, six.renewed.Equal(l.renewed))

	old := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"trench": "blue", "family": "ipv4", "conduit": "c", "node": "w1", "prefix": "172.16.0.0/24",
		"children": []any{map[string]any{"name": "a", "address": "172.16.0.5/32", "renewed": "2026-12-06T05:00:00.123456789Z"}},
	}}}
	got, _, err = decodeBlock(old)
	require.NoError(t, err)
	assert.Equal(t, map[string]lease{"a": {prefix: netip.MustParsePrefix("172.16.0.5/32"), renewed: t0}}, got.children)

	for _, bad := range []string{"", "not-an-address", "172.16.0.5 yesterday"} {
		_, err := parseLease(bad)
		assert.Error(t, err, "%q", bad)
	}
}
