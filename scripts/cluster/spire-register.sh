#!/usr/bin/env bash
# Registers workloads with the test cluster's SPIRE server, by namespace and
# service account, as the chart and NSM expect their SPIFFE IDs:
#
#   spire-register.sh node                  the node alias every agent joins (up.sh)
#   spire-register.sh NAMESPACE SA...       spiffe://<trust domain>/ns/NAMESPACE/sa/SA
#
# Idempotent: an entry that exists is left as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"

node_id="spiffe://$TRUST_DOMAIN/k8s-node/causeway"

# entry ARGS...: creates an entry with the server's CLI in its pod; an entry
# that already exists counts as created.
entry() {
	local out
	if out="$(kubectl -n spire exec deploy/spire-server -c spire-server -- /spire-server entry create "$@" 2>&1)"; then
		return
	fi
	if echo "$out" | grep -q AlreadyExists; then
		return
	fi
	die "spire entry create $*: $out"
}

if [ "${1:-}" = node ]; then
	entry -node -spiffeID "$node_id" -selector k8s_psat:cluster:causeway
	exit
fi
ns="${1:?usage: spire-register.sh node | NAMESPACE SA...}"
shift
for sa in "$@"; do
	entry -parentID "$node_id" -spiffeID "spiffe://$TRUST_DOMAIN/ns/$ns/sa/$sa" \
		-selector "k8s:ns:$ns" -selector "k8s:sa:$sa"
done
