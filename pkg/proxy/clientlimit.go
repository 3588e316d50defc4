package proxy

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultMaxConnectionsPerClient bounds the target connections one client
// holds on a proxy: half of an IPv4 /24 node subnet.
const DefaultMaxConnectionsPerClient = 128

// clientIdentity is who opened a target connection, for its limit: the
// subject of the token of the path's first segment (the SPIFFE ID that
// signed the client's own segment; NSM's authorization checks the path's
// tokens before the request reaches the proxy), else the pod the
// connection names, else the connection itself (id: its key). A client
// with a SPIFFE ID cannot escape its limit by choosing new connection ids;
// without signed tokens (plain, local use) it can name other pods.
func clientIdentity(conn *networkservice.Connection, id string) string {
	segs := conn.GetPath().GetPathSegments()
	if len(segs) > 0 {
		if sub := tokenSubject(segs[0].GetToken()); sub != "" {
			return sub
		}
	}
	if pod := conn.GetLabels()[PodNameLabel]; pod != "" {
		return "pod:" + pod
	}
	return "connection:" + id
}

// tokenSubject is the "sub" claim of a signed JWT, read without checking
// its signature (done earlier in the chain); "" when it has none, or when
// the token is unsigned (alg "none", plain local use: every client's
// token then has the same subject, which proves nothing).
func tokenSubject(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if decodeJWTPart(parts[0], &header) != nil || header.Alg == "" || strings.EqualFold(header.Alg, "none") ||
		decodeJWTPart(parts[1], &claims) != nil {
		return ""
	}
	return claims.Sub
}

func decodeJWTPart(part string, into any) error {
	raw, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// admitTargetLocked refuses a new target connection id of a client that
// holds Config.MaxConnectionsPerClient already (ResourceExhausted),
// counting its new connections still being allocated: two that race cannot
// both take the last place. An admitted new id is held as such until
// doneAdmitting. A connection the proxy knows (a refresh, a heal) is
// always admitted. p.mu must be held.
func (p *Proxy) admitTargetLocked(id, client string) error {
	if _, known := p.conns[id]; known {
		return nil
	}
	n := 0
	for _, st := range p.conns {
		if st.typ == TargetConn && st.clientID == client {
			n++
		}
	}
	for other, c := range p.admitting {
		if _, known := p.conns[other]; !known && c == client {
			n++
		}
	}
	max := p.cfg.MaxConnectionsPerClient
	if n < max {
		p.admitting[id] = client
		return nil
	}
	p.refusals.Refuse("connections_per_client", max, client, "id", id)
	return status.Errorf(codes.ResourceExhausted, "client %s holds %d connections to this proxy, the limit: connection %s refused", client, n, id)
}

// doneAdmitting ends the hold admitTargetLocked put on id: its request
// committed it to conns or failed.
func (p *Proxy) doneAdmitting(id string) {
	p.mu.Lock()
	delete(p.admitting, id)
	p.mu.Unlock()
}
