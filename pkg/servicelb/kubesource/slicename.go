package kubesource

import (
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
)

// SliceName is the name of the slice that the proxy of node publishes for
// the Service svc and one IP family: <svc>-<hash of node>-v4|v6, a
// Service name longer than 40 characters cut to 31 and followed by its
// hash, so that two long names with one beginning stay apart (the slice's
// label names the Service whole).
func SliceName(svc, node string, family corev1.IPFamily) string {
	if len(svc) > 40 {
		svc = svc[:31] + shortHash(svc)
	}
	fam := "v4"
	if family == corev1.IPv6Protocol {
		fam = "v6"
	}
	return fmt.Sprintf("%s-%s-%s", svc, shortHash(node), fam)
}

// nodeValue is node as a label value: itself when it fits (63 characters),
// its hash otherwise.
func nodeValue(node string) string {
	if len(node) <= 63 {
		return node
	}
	return shortHash(node)
}

func shortHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}
