package spiffeauthz

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// Rule is one pattern of the callers a server accepts, written as a SPIFFE
// ID whose trust domain may be left out and whose path may hold wildcards:
//
//	spiffe://example.org/ns/causeway/sa/proxy-a    this ID only
//	/ns/causeway/sa/proxy-a                        this path in the server's own trust domain
//	/ns/causeway/pod/proxy-a-lb-?????              the pods of a DaemonSet (NSM's pod-based IDs)
//
// Wildcards are those of path.Match: '*' any run and '?' any one character,
// '[a-z0-9]' a class; none of them crosses a '/', so a pattern matches
// only IDs with as many path segments as it has.
type Rule struct {
	// trustDomain is the rule's trust domain; zero: the server's own.
	trustDomain spiffeid.TrustDomain
	// pattern is the path pattern, starting with '/'.
	pattern string
}

// ParseRule parses one rule; the error names what is wrong with it.
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	var r Rule
	switch {
	case strings.HasPrefix(s, "spiffe://"):
		rest := strings.TrimPrefix(s, "spiffe://")
		td, p, ok := strings.Cut(rest, "/")
		if !ok {
			return Rule{}, fmt.Errorf("%q has no path: want spiffe://<trust domain>/<path> or /<path>", s)
		}
		parsed, err := spiffeid.TrustDomainFromString(td)
		if err != nil {
			return Rule{}, fmt.Errorf("%q: trust domain: %w", s, err)
		}
		r = Rule{trustDomain: parsed, pattern: "/" + p}
	case strings.HasPrefix(s, "/"):
		r = Rule{pattern: s}
	default:
		return Rule{}, fmt.Errorf("%q is neither a SPIFFE ID (spiffe://<trust domain>/<path>) nor a path (/<path>)", s)
	}
	if err := checkPattern(r.pattern); err != nil {
		return Rule{}, fmt.Errorf("%q: %w", s, err)
	}
	return r, nil
}

// checkPattern refuses a path pattern that path.Match cannot use or that
// no SPIFFE ID could have (empty segments, a trailing '/').
func checkPattern(p string) error {
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("bad wildcard: %w", err)
	}
	if p == "/" || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
		return errors.New("a path of non-empty segments is needed, without a trailing '/'")
	}
	return nil
}

// ParseRules parses rules, naming the first bad one.
func ParseRules(list []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(list))
	for _, s := range list {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// String is the rule as written, the trust domain shown when it has one.
func (r Rule) String() string {
	if r.trustDomain.IsZero() {
		return r.pattern
	}
	return "spiffe://" + r.trustDomain.Name() + r.pattern
}

// Miss says why id does not match r, own being the server's trust domain;
// "" when it matches.
func (r Rule) Miss(id spiffeid.ID, own spiffeid.TrustDomain) string {
	td := r.trustDomain
	if td.IsZero() {
		td = own
	}
	if td.IsZero() {
		return "the server's own trust domain is not known yet"
	}
	if id.TrustDomain() != td {
		return fmt.Sprintf("trust domain %s is not %s", id.TrustDomain().Name(), td.Name())
	}
	if ok, _ := path.Match(r.pattern, id.Path()); !ok {
		return fmt.Sprintf("path %s does not match %s", id.Path(), r.pattern)
	}
	return ""
}

// IDCheck returns the check of an ID against rules (in the trust domain own
// gives for those that leave it out): nil when it matches one, else an
// error saying why each rule missed it. Empty rules: nil, no check.
func IDCheck(rules []string, own TrustDomainFunc) (func(spiffeid.ID) error, error) {
	parsed, err := ParseRules(rules)
	if err != nil || len(parsed) == 0 {
		return nil, err
	}
	a := New(parsed, own, nil)
	return func(id spiffeid.ID) error {
		if misses, ok := a.check(id); !ok {
			return fmt.Errorf("%s matches none of the rules (%s)", id, strings.Join(misses, "; "))
		}
		return nil
	}, nil
}
