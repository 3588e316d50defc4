#!/usr/bin/env bash
# Run by `make lab` and `make test` before anything else: they need root (network
# namespaces, bridges, nftables) and the tools of scripts/install-deps.sh, which
# it installs when missing. Quiet and quick when all is there.
set -euo pipefail
what=${1:-this}
if [ "$(id -u)" != 0 ]; then
	echo "make $what: needs root (network namespaces, bridges, rules and nftables); run it as root" >&2
	exit 1
fi
dir=$(dirname "$0")
if ! "$dir/install-deps.sh" --check 2>/dev/null; then
	echo "make $what: installing missing prerequisites (scripts/install-deps.sh)"
	"$dir/install-deps.sh"
fi
