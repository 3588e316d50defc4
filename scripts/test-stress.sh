#!/usr/bin/env bash
# `make test-stress`: `make test` with every core kept busy by other work,
# one busy loop per core at normal priority beside it, so that a test that
# counts on an idle machine fails here rather than in CI. The loops are this
# script's children and are stopped when it ends, whatever the outcome.
set -euo pipefail
loops=${STRESS_LOOPS:-$(nproc)}
pids=()
stop_loops() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
}
trap stop_loops EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for ((i = 0; i < loops; i++)); do
	sh -c 'while :; do :; done' &
	pids+=($!)
done
echo "make test-stress: $loops busy loops (pids ${pids[*]}) beside make test"
# make runs in the background so that a signal to this script reaches its
# trap at once (wait returns); make itself is stopped with the loops.
"${MAKE:-make}" test &
pids+=($!)
wait "$!"
