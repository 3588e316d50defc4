#!/usr/bin/env bash
# Runs Causeway's benchmarks (some need root) and prints the results. Every
# benchmark reports a ratio against a baseline measured in the same run, so
# figures are comparable across machines; see docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=$(go list ./... )
go test -run '^$' -bench . -benchmem ${BENCHTIME:+-benchtime $BENCHTIME} -count 1 $pkgs "$@"
