#!/usr/bin/env bash
# Instructions the gateway spends per run request, counted by callgrind: steady where this
# machine's clock is not (two runs of one binary differ by up to 1.5 %, which task runs first
# after a wake-up not being fixed), so it compares two builds of the request path. The
# binary runs under `valgrind --tool=callgrind --instr-atstart=no` in front of the benchmark's
# mock (one content event per run, no wait), three warm-up requests go through uncounted, then
# N sequential `curl` requests with instrumentation on. An AAP request is a turn (`"stream":
# "delta"`) on a session of its own, created before counting starts. Prints instructions per
# request and leaves the callgrind file for `callgrind_annotate --inclusive=yes FILE`.
#
# With `--events N --pace-us P` each run has N content events P µs apart, one per chunk, so
# each has its own read and write, as in the latency scenario: with many events (2,200) the
# total over N is the per-event path's instructions, the opening a few per cent of it. Keep P
# at 2,000 or more: closer together, a run's first events come several to a read while
# valgrind translates the code, and totals vary by a few per cent. `--one-cpu` runs the
# gateway on CPU 1 alone (its runtime is then the current-thread one, as in the benchmark) and
# the mock on CPU 0.
#
#   benches/request_instructions.sh [--requests 100] [--client ag-ui|hai|aap] [--events 1]
#       [--pace-us 0] [--one-cpu] [--out FILE] [BINARY]
#
# BINARY defaults to target/release/dialect-proxy (built here, as shipped); the mock is the
# end-to-end benchmark's (`cargo bench --bench e2e --no-run` builds it). Needs valgrind and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

requests=100 client=ag-ui events=1 pace_us=0 on0=() on1=() out=target/e2e/request-instructions.callgrind
while [ $# -gt 0 ]; do
    case "$1" in
        --requests) requests=$2; shift 2 ;;
        --client) client=$2; shift 2 ;;
        --events) events=$2; shift 2 ;;
        --pace-us) pace_us=$2; shift 2 ;;
        --one-cpu) on0=(taskset -c 0) on1=(taskset -c 1); shift ;;
        --out) out=$2; shift 2 ;;
        -*) echo "usage: $0 [--requests N] [--client ag-ui|hai|aap] [--events N] [--pace-us P] [--one-cpu] [--out FILE] [BINARY]" >&2; exit 2 ;;
        *) break ;;
    esac
done
binary=${1:-target/release/dialect-proxy}
for tool in valgrind callgrind_control curl; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 1; }
done
case $client in
    ag-ui) body='{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}' ;;
    hai) body='{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi","timestamp":1760000000000}],"context":[],"tools":[]}' ;;
    aap) body='{"stream":"delta","messages":[{"role":"user","content":"hi"}]}' ;;
    *) echo "--client: ag-ui, hai or aap" >&2; exit 2 ;;
esac
if [ "$client" = aap ] && [ "$requests" -gt 100 ]; then
    echo "--client aap: at most 100 requests (a caller may hold 100 sessions)" >&2; exit 2
fi
mock=$(cargo bench --bench e2e --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "e2e" and m.get("executable"):
        print(m["executable"])')
[ -n "$mock" ] || { echo "could not build the benchmark's mock" >&2; exit 1; }
# Built even when present, and after the mock: a `cargo bench` build leaves a binary there with
# tokio's `test-util` (turned on by the dev-dependencies), which is not the one that ships.
[ $# -gt 0 ] || cargo build --release --locked --bin dialect-proxy

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
listening() { # FILE: waits for "http://HOST:PORT" in it, prints PORT
    for _ in $(seq 150); do
        if grep -q 'http://' "$1" 2>/dev/null; then grep -o 'http://[0-9.:]*' "$1" | head -1 | sed 's/.*://'; return; fi
        sleep 0.2
    done
    echo "no address in $1" >&2; exit 1
}

"${on0[@]}" "$mock" mock --delay-ms 0 --events "$events" --pace-us "$pace_us" --delta-bytes 60 --mode normal \
    --flood-bytes 0 --chunking event >"$work/mock.out" 2>&1 &
pids+=($!)
upstream=$(listening "$work/mock.out")
mkdir -p "$(dirname "$out")"
face=(--client "$client")
[ "$client" != aap ] || face+=(--agent-name bench)
"${on1[@]}" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "$binary" serve \
    --listen 127.0.0.1:0 "${face[@]}" --upstream "http://127.0.0.1:$upstream/" \
    --upstream-dialect ag-ui >"$work/gateway.out" 2>"$work/gateway.err" &
gateway=$!
pids+=($gateway)
port=$(listening "$work/gateway.out")
post() { # PATH BODY
    "${on0[@]}" curl -sf -H 'content-type: application/json' -H 'accept: text/event-stream' -d "$2" \
        "http://127.0.0.1:$port$1"
}
path() { # a new session's turns (AAP), or the run path
    if [ "$client" = aap ]; then
        local session
        session=$(post /sessions '{"agent":{"name":"bench"}}' |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["sessionId"])')
        echo "/sessions/$session/turns"
    else
        echo /
    fi
}
for _ in 1 2 3; do
    warm=$(path)
    post "$warm" "$body" >/dev/null
    # A caller may hold 100 sessions: the warm-up's go before the counted ones are made.
    [ "$client" != aap ] || curl -sf -X DELETE "http://127.0.0.1:$port${warm%/turns}" >/dev/null
done
paths=()
for _ in $(seq "$requests"); do paths+=("$(path)"); done
next=0
request() { post "${paths[$next]}" "$body" >/dev/null; next=$((next + 1)); }
callgrind_control -i on "$gateway" >/dev/null 2>&1
for _ in $(seq "$requests"); do request; done
callgrind_control -i off "$gateway" >/dev/null 2>&1
kill -TERM "$gateway"
wait "$gateway" || true
total=$(awk '/^totals:/ {print $2; exit}' "$out")
echo "$client: $((total / requests)) instructions per request ($requests requests of $events events; $out)"
