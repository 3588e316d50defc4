#!/usr/bin/env bash
# make figures: measures every figure of docs/performance.md's and
# docs/reliability.md's tables in one run and prints them, each beside the baseline its
# benchmark or scenario measures in the same run (sub-benchmarks named
# baseline/meridio-like/one-fsync, or the direct path of the throughput test).
# Needs root (kernel benchmarks, the lab). The raw output is kept in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
OUT=${OUT:-$(mktemp -d /tmp/causeway-figures.XXXX)}
mkdir -p "$OUT"
make -s build >/dev/null

# package | benchmark regexp | -benchtime
benches=(
	"./pkg/ipam|.|1s"
	"./pkg/ipam/store/bolt|.|1s"
	"./pkg/dataplane|.|100x"
	"./pkg/proxy|.|2000x"
	"./cmd/ipam|RSS|1x"
	"./cmd/proxy|ProxyRSS|1x"
	"./pkg/proxyd|TargetRequest|1x"
)
# Packages added later (service LB, ...) bring their own benchmarks: every
# package with a Benchmark function that the table does not name runs at 1s.
listed=" $(printf '%s\n' "${benches[@]}" | cut -d'|' -f1 | tr '\n' ' ') "
for p in $(grep -rl --include='*_test.go' '^func Benchmark' pkg cmd internal 2>/dev/null | xargs -r -n1 dirname | sort -u); do
	[[ $listed == *" ./$p "* ]] || benches+=("./$p|.|1s")
done

echo "== benchmarks (raw output in $OUT/bench.txt)"
: >"$OUT/bench.txt"
for b in "${benches[@]}"; do
	IFS='|' read -r pkg re bt <<<"$b"
	echo "-- $pkg (-bench '$re' -benchtime $bt)"
	go test -run '^$' -bench "$re" -benchtime "$bt" -benchmem -count 1 "$pkg" 2>&1 | tee -a "$OUT/bench.txt" |
		grep -E '^Benchmark' || echo "   (failed: see $OUT/bench.txt)"
done

echo "== proxy memory at 500 targets (raw output in $OUT/memory.txt)"
CAUSEWAY_PROXY_MEM_TARGETS=500 go test -count=1 -v -run '^TestProxyMemory$' ./cmd/proxy >"$OUT/memory.txt" 2>&1 ||
	echo "   (failed: see $OUT/memory.txt)"
grep -ho 'FIGURE: .*' "$OUT/memory.txt" | sed 's/^/   /' || echo "   (no FIGURE lines)"

echo "== end-to-end figures (raw output in $OUT/e2e.txt)"
go test -count=1 -v -timeout 20m ./test/e2e "$@" >"$OUT/e2e.txt" 2>&1 || echo "   (some scenarios failed: see $OUT/e2e.txt)"
grep -ho 'FIGURE: .*' "$OUT/e2e.txt" | sed 's/^/   /' || echo "   (no FIGURE lines)"
echo "== done; raw output in $OUT"
