#!/usr/bin/env bash
# What the gateway's own allocator says under the soak (scenario g of the end-to-end benchmark):
# the gateway built with jemalloc's statistics (`--features jemalloc-stats`, in a target
# directory of its own), made to print them to its log every 64 MiB allocated
# (8 MiB with --quick; `_RJEM_MALLOC_CONF`, through BENCH_GATEWAY), one direction at a time; then
# benches/allocator_summary.py writes jemalloc's counts over time beside the RSS, their slopes
# over the second half, and the size classes behind every step in its pages to
# benches/ALLOCATOR.md. Where benches/heap_profile.sh watches the heap on the system allocator
# (heaptrack cannot follow jemalloc), this watches the allocator the gateway ships with: it tells
# a program that holds more (allocated grows) from an allocator that spreads what it holds over
# more pages (only active and RSS grow).
#
#   benches/allocator_profile.sh                  AG-UI → HAI, 10,000 streams for 600 s
#   benches/allocator_profile.sh --quick          1,000 streams for 60 s
#   benches/allocator_profile.sh --comparators ag-ui
#   ALLOCATOR_OUT=/tmp/ALLOCATOR.md benches/allocator_profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."

comparator=hai
quick=()
duration=600
# Bytes allocated between two prints: about one every 4 s under the full soak.
interval=67108864
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick); duration=60; interval=8388608; shift ;;
        --comparators) comparator=$2; shift 2 ;;
        *) echo "usage: benches/allocator_profile.sh [--quick] [--comparators ag-ui|hai]" >&2; exit 2 ;;
    esac
done

cargo build --release --locked --features jemalloc-stats --bin dialect-proxy \
    --target-dir target/jemalloc-stats
dir=$PWD/target/e2e/allocator
rm -rf "$dir"
mkdir -p "$dir"
binary=$PWD/target/jemalloc-stats/release/dialect-proxy
wrapper=$dir/gateway.sh
# The totals and the merged arena's bins and large classes; not the configuration (g), each
# arena apart (a), destroyed arenas (d), mutexes (x), extents (e) or the HPA (h).
printf '#!/bin/sh\n_RJEM_MALLOC_CONF=stats_interval:%s,stats_interval_opts:gdaxeh exec %s "$@"\n' \
    "$interval" "$binary" >"$wrapper"
chmod +x "$wrapper"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
command_line="benches/allocator_profile.sh${quick[*]:+ ${quick[*]}} --comparators $comparator"
BENCH_GATEWAY=$wrapper cargo bench --bench e2e -- --scenarios g --comparators "$comparator" \
    "${quick[@]}" --out "$dir/run.md" --command-line "$command_line"

# The benchmark writes the gateway's stderr to gateway.log and the soak's RSS samples to a CSV
# named after the direction, both in target/e2e.
label=$([ "$comparator" = hai ] && echo ag-ui-hai || echo ag-ui-ag-ui)
csv=target/e2e/soak-gateway-$label.csv
out=${ALLOCATOR_OUT:-benches/ALLOCATOR.md}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || commit="$commit (with uncommitted changes)"
python3 benches/allocator_summary.py target/e2e/gateway.log "$csv" --duration "$duration" \
    --command "$command_line" --commit "$commit" >"$out"
echo "allocator profile written to $out"
