package kubesource

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/causeway-net/causeway/internal/limits"
)

// IDScheme says how SPIRE names pods, and so how the proved SPIFFE ID of
// a target's client (Conn.Identity) must name the pod its connection
// claims before that pod's target is published.
type IDScheme string

// The schemes, as the chart's spire.idScheme.
const (
	// IDSchemeOff publishes the pod a connection claims (no SPIFFE:
	// insecure mode).
	IDSchemeOff IDScheme = "off"
	// IDSchemePod: spiffe://<td>/ns/<namespace>/pod/<name>, the pod's
	// namespace and name exactly.
	IDSchemePod IDScheme = "pod"
	// IDSchemeServiceAccount: spiffe://<td>/ns/<namespace>/sa/<account>,
	// the pod's namespace and spec.serviceAccountName (any pod of that
	// account in that namespace passes: the scheme tells them apart no
	// further).
	IDSchemeServiceAccount IDScheme = "serviceAccount"
	// IDSchemeAny: either form, checked as above.
	IDSchemeAny IDScheme = "any"
)

// ParseIDScheme reads a scheme; "" is IDSchemeOff.
func ParseIDScheme(s string) (IDScheme, error) {
	switch sc := IDScheme(strings.TrimSpace(s)); sc {
	case "", IDSchemeOff:
		return IDSchemeOff, nil
	case IDSchemePod, IDSchemeServiceAccount, IDSchemeAny:
		return sc, nil
	default:
		return "", fmt.Errorf("target identity scheme %q: want off, pod, serviceAccount or any", s)
	}
}

// identityCheck holds targets to their proved identity (WithTargetIdentity).
type identityCheck struct {
	scheme   IDScheme
	own      func() spiffeid.TrustDomain
	refusals *limits.Refusals
}

// NewIdentityRefusals returns the refusals of targets for their identity:
// the counter causeway_proxy_service_targets_unpublished_total{limit="identity"},
// a log line once per (identity, pod).
func NewIdentityRefusals(o ...Option) *limits.Refusals {
	return limits.NewNamed("causeway_proxy_service", "targets_unpublished_total",
		"Target connections not published for the pod they claim, by rule (identity: the client's proved SPIFFE ID does not name the pod).",
		"target not published: its client's proved SPIFFE ID does not name the pod its connection claims (logged once per identity and pod)",
		newOptions(o).log)
}

// WithTargetIdentity makes NodePods publish a connection's pod only when
// the connection's proved identity names it under scheme, in the trust
// domain own returns (the proxy's own); a mismatch is left out, counted
// in refusals and logged once per (identity, pod). IDSchemeOff (the
// default) checks nothing.
func WithTargetIdentity(scheme IDScheme, own func() spiffeid.TrustDomain, refusals *limits.Refusals) Option {
	return func(o *options) {
		o.identity = identityCheck{scheme: scheme, own: own, refusals: refusals}
	}
}

// on says whether the check is made.
func (c identityCheck) on() bool { return c.scheme != "" && c.scheme != IDSchemeOff }

// miss says why identity does not name pod; "" when it does.
func (c identityCheck) miss(identity string, pod *corev1.Pod) string {
	if identity == "" {
		return "the client's SPIFFE ID is not proved (its token carries no certificate, or it did not verify)"
	}
	id, err := spiffeid.FromString(identity)
	if err != nil {
		return fmt.Sprintf("not a SPIFFE ID: %v", err)
	}
	var own spiffeid.TrustDomain
	if c.own != nil {
		own = c.own()
	}
	if id.TrustDomain() != own {
		return fmt.Sprintf("trust domain %s is not the proxy's %q", id.TrustDomain().Name(), own.Name())
	}
	segs := strings.Split(strings.TrimPrefix(id.Path(), "/"), "/")
	if len(segs) != 4 || segs[0] != "ns" {
		return "the ID's path is not /ns/<namespace>/pod/<name> nor /ns/<namespace>/sa/<account>"
	}
	if segs[1] != pod.Namespace {
		return fmt.Sprintf("namespace %s is not the pod's %s", segs[1], pod.Namespace)
	}
	switch {
	case segs[2] == "pod" && c.scheme != IDSchemeServiceAccount:
		if segs[3] != pod.Name {
			return fmt.Sprintf("pod %s is not %s", segs[3], pod.Name)
		}
	case segs[2] == "sa" && c.scheme != IDSchemePod:
		if segs[3] != pod.Spec.ServiceAccountName {
			return fmt.Sprintf("service account %s is not the pod's %s", segs[3], pod.Spec.ServiceAccountName)
		}
	default:
		return fmt.Sprintf("an ID of the form .../%s/... is not one of scheme %s", segs[2], c.scheme)
	}
	return ""
}

// inNamespaceOf are the pods of the namespace identity names: of pods of
// one name in several namespaces, the one the client proved it runs in.
func inNamespaceOf(pods []*corev1.Pod, identity string) []*corev1.Pod {
	id, err := spiffeid.FromString(identity)
	if err != nil {
		return pods
	}
	segs := strings.Split(strings.TrimPrefix(id.Path(), "/"), "/")
	if len(segs) < 2 || segs[0] != "ns" {
		return pods
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Namespace == segs[1] {
			out = append(out, p)
		}
	}
	return out
}
