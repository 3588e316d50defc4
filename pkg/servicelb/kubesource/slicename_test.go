package kubesource

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Slice names are valid, per node and family, and two long Service names
// with one beginning get different slices.
func TestSliceName(t *testing.T) {
	long := strings.Repeat("a", 50)
	names := []string{
		SliceName("web", "node-a", corev1.IPv4Protocol), SliceName("web", "node-a", corev1.IPv6Protocol),
		SliceName("web", "node-b", corev1.IPv4Protocol),
		SliceName(long+"x", "node-a", corev1.IPv4Protocol), SliceName(long+"y", "node-a", corev1.IPv4Protocol),
	}
	seen := map[string]bool{}
	for _, n := range names {
		assert.Empty(t, validation.IsDNS1123Subdomain(n), n)
		assert.LessOrEqual(t, len(n), 63, n)
		assert.False(t, seen[n], "%s twice", n)
		seen[n] = true
	}
	assert.Equal(t, SliceName("web", "node-a", corev1.IPv4Protocol), names[0], "deterministic")
	assert.Empty(t, validation.IsValidLabelValue(nodeValue(strings.Repeat("n", 100))))
}
