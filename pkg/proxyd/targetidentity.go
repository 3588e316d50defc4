package proxyd

import (
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// targetIdentity proves the targets' clients by the certificates their
// tokens carry (each token for one client connection, not after it ended)
// and admits those NSM_TARGET_IDS lists (empty: any, with a warning); in
// insecure mode nothing is proved nor checked (NSM_TARGET_IDS, if set, is
// ignored with a warning). The metrics read the ledger of its tokens
// (ledgerStats).
func (d *Daemon) targetIdentity() (proxy.TargetIdentity, error) {
	if !d.creds.Secure() {
		if len(d.cfg.TargetIDs) > 0 {
			d.log.Warn("NSM_TARGET_IDS ignored: insecure mode proves no client's identity")
		}
		return proxy.TargetIdentity{}, nil
	}
	allowed, err := spiffeauthz.IDCheck(d.cfg.TargetIDs, d.creds.TrustDomain)
	if err != nil {
		return proxy.TargetIdentity{}, err
	}
	if allowed != nil {
		d.log.Info("targets admitted by SPIFFE ID", "rules", d.cfg.TargetIDs)
	} else {
		d.log.Warn("NSM_TARGET_IDS is empty: any client NSM lets through may connect as a target, proved or not (docs/security.md)")
	}
	prover := d.creds.ClientProver(clientproof.WithLogger(d.log.With("subsystem", "clientproof")))
	d.ledgerStats = prover.Ledger
	return proxy.TargetIdentity{Prove: prover.Client, Allowed: allowed, End: prover.End}, nil
}

// targetIDScheme is NSM_TARGET_ID_SCHEME, off in insecure mode.
func (d *Daemon) targetIDScheme() kubesource.IDScheme {
	scheme, err := kubesource.ParseIDScheme(d.cfg.TargetIDScheme)
	if err != nil || d.creds == nil || !d.creds.Secure() {
		return kubesource.IDSchemeOff
	}
	return scheme
}
