#!/usr/bin/env bash
# The gateway's heap under the soak (scenario g of the end-to-end benchmark): the gateway built
# on the system allocator (`--no-default-features`, which heaptrack can follow; jemalloc it
# cannot), run under heaptrack through BENCH_GATEWAY, one direction at a time; then
# benches/heap_summary.py writes the live heap over time, its slope over the second half and the
# allocation sites still live at the end to benches/HEAP.md. It tells a program that keeps
# memory per stream served (a leak) from an allocator that spreads over more pages (RSS only).
#
#   benches/heap_profile.sh                  AG-UI → AG-UI, 10,000 streams for 600 s
#   benches/heap_profile.sh --quick          1,000 streams for 60 s
#   benches/heap_profile.sh --comparators hai
#   HEAP_OUT=/tmp/HEAP.md benches/heap_profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."

comparator=ag-ui
quick=()
duration=600
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick); duration=60; shift ;;
        --comparators) comparator=$2; shift 2 ;;
        *) echo "usage: benches/heap_profile.sh [--quick] [--comparators ag-ui|hai]" >&2; exit 2 ;;
    esac
done
command -v heaptrack >/dev/null || { echo "heaptrack is not installed (Debian: heaptrack)" >&2; exit 1; }

cargo build --release --locked --no-default-features --bin dialect-proxy --target-dir target/sysalloc
dir=$PWD/target/e2e/heap
rm -rf "$dir"
mkdir -p "$dir"
binary=$PWD/target/sysalloc/release/dialect-proxy
wrapper=$dir/gateway.sh
# One recording per gateway the benchmark starts (it qualifies one before the soak).
printf '#!/bin/sh\nexec heaptrack -o %s/gateway-$$ %s "$@"\n' "$dir" "$binary" >"$wrapper"
chmod +x "$wrapper"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
command_line="benches/heap_profile.sh${quick[*]:+ ${quick[*]}} --comparators $comparator"
BENCH_GATEWAY=$wrapper cargo bench --bench e2e -- --scenarios g --comparators "$comparator" \
    "${quick[@]}" --out "$dir/run.md" --command-line "$command_line"
# The benchmark stops a gateway by killing heaptrack's script, which leaves the gateway itself
# running: end it gracefully so that heaptrack writes the rest of its recording.
pkill -TERM -f "^$binary serve" || true
while pgrep -f "^$binary serve|heaptrack_interpret" >/dev/null; do sleep 1; done

# The soak's gateway is the one with --max-streams; its recording is the largest.
recording=$(ls -S "$dir"/gateway-*.zst | head -n 1)
out=${HEAP_OUT:-benches/HEAP.md}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || commit="$commit (with uncommitted changes)"
python3 benches/heap_summary.py "$recording" --duration "$duration" --command "$command_line" \
    --massif "$dir/heap.massif" \
    --commit "$commit" >"$out"
echo "heap profile written to $out (recording $recording)"
