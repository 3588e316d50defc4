#!/usr/bin/env bash
# Installs the system packages Causeway's build, tests and lab need (Debian).
set -euo pipefail
pkgs=(protobuf-compiler iproute2 conntrack nftables iputils-ping procps psmisc)
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
