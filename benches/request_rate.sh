#!/usr/bin/env bash
# Short runs per second through one or more dialect-proxy binaries, next to an nginx proxy hop,
# all in front of the same nginx that answers every POST with a two-event AG-UI stream (no
# agent time, so the figure is the per-request cost of the hop). Needs nginx and wrk (Debian).
#
#   benches/request_rate.sh [--duration 10] [--rounds 3] [--connections 16] BINARY...
#
# Rounds alternate the comparators, so drift on the machine hits each alike; prints requests/s
# per round and the median per comparator.
set -euo pipefail
duration=10 rounds=3 connections=16
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--duration S] [--rounds N] BINARY..." >&2; exit 2; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

agent=$(port) hop=$(port)
mkdir -p "$work/nginx/logs"
cat >"$work/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx/cb; proxy_temp_path $work/nginx/px;
  fastcgi_temp_path $work/nginx/fc; uwsgi_temp_path $work/nginx/uw; scgi_temp_path $work/nginx/sc;
  server {
    listen 127.0.0.1:$agent;
    location / {
      default_type text/event-stream;
      return 200 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}

data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}

data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hello"}

data: {"type":"TEXT_MESSAGE_END","messageId":"m"}

data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}

';
    }
  }
  server {
    listen 127.0.0.1:$hop;
    location / {
      proxy_pass http://127.0.0.1:$agent; proxy_buffering off; proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
CONF
nginx -p "$work/nginx" -e "$work/nginx/logs/error.log" -c "$work/nginx/nginx.conf" &
pids+=($!)

cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "text/event-stream"
wrk.body = '{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}'
LUA

names=("nginx hop") urls=("http://127.0.0.1:$hop/agent")
i=0
for bin in "$@"; do
    i=$((i + 1))
    "$bin" serve --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$agent/agent" \
        --upstream-dialect ag-ui --client ag-ui >"$work/gw$i.out" 2>/dev/null &
    pids+=($!)
    for _ in $(seq 1 100); do grep -q listening "$work/gw$i.out" && break; sleep 0.05; done
    addr=$(sed -n 's|^dialect-proxy listening on ||p' "$work/gw$i.out")
    names+=("$bin") urls+=("$addr/agent")
done
sleep 0.5
declare -A all
for round in $(seq 1 "$rounds"); do
    for k in "${!urls[@]}"; do
        out=$(wrk -t1 -c"$connections" -d"${duration}s" -s "$work/post.lua" "${urls[$k]}")
        rate=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
        # Every answer must be a 200: a refusal is fast and would flatter the rate.
        if grep -q "Non-2xx" <<<"$out"; then
            echo "${names[$k]}: $(grep Non-2xx <<<"$out")" >&2
            exit 1
        fi
        echo "round $round: ${names[$k]}: $rate req/s"
        all[$k]="${all[$k]:-} $rate"
    done
done
echo
for k in "${!urls[@]}"; do
    median=$(tr ' ' '\n' <<<"${all[$k]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "median: ${names[$k]}: $median req/s (rounds:${all[$k]})"
done
