#!/usr/bin/env bash
# Profile of the per-event path: scenario a of the end-to-end benchmark (100 streams × 100
# events/s, one event per HTTP chunk) with `perf record -g` attached to each process in the
# middle (nginx and the gateway, pinned alone on CPU 1 as in the benchmark), summarised by
# benches/perf_summary.py into benches/PROFILE.md: CPU time per event, kernel and user, the
# share inside syscalls and by syscall, user time by crate, the top symbols by self time.
#
#   benches/profile.sh                              nginx, gateway ag-ui→ag-ui and ag-ui→hai
#   benches/profile.sh --comparators nginx,ag-ui,hai,aap-delta,aap-message
#   PROFILE_OUT=/tmp/PROFILE.md benches/profile.sh  the summary elsewhere
#
# It profiles the binary BENCH_GATEWAY names (`benches/run` sets it to the release build, as
# shipped), else the one `cargo bench` builds; both keep debug line tables
# (`[profile.release] debug = 1`). BENCH_NO_INSTALL=1 skips installing
# perf and nginx when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

comparators=nginx,ag-ui,hai
while [ $# -gt 0 ]; do
    case "$1" in
        --comparators) comparators=$2; shift 2 ;;
        --comparators=*) comparators=${1#*=}; shift ;;
        *) echo "usage: benches/profile.sh [--comparators LIST]" >&2; exit 2 ;;
    esac
done

apt_install() {
    [ "${BENCH_NO_INSTALL:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
    echo "$1 is missing: installing it (BENCH_NO_INSTALL=1 skips this)"
    { apt-get update -qq && apt-get install -y -qq "${@:2}"; } >/dev/null 2>&1
}
command -v perf >/dev/null 2>&1 || apt_install perf linux-perf ||
    { echo "perf is not installed and could not be: no profile" >&2; exit 1; }
command -v nginx >/dev/null 2>&1 || apt_install nginx nginx-light ||
    echo "note: nginx is not installed: the profile has the gateway only"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
dir=target/e2e/perf
rm -rf "$dir"
out=${PROFILE_OUT:-benches/PROFILE.md}
command_line="benches/profile.sh --comparators $comparators"
cargo bench --bench e2e -- --scenarios a --runs 1 --comparators "$comparators" \
    --perf-dir "$dir" --out target/e2e/profile-run.md --command-line "$command_line"
python3 benches/perf_summary.py "$dir" --command "$command_line" >"$out"
echo "profile written to $out (perf data in $dir)"
