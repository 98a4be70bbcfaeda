#!/usr/bin/env python3
"""What each session store adds to an AAP turn: dialect-proxy's AAP face with `[sessions] store`
= memory, file and redis, in front of the same instant AG-UI agent (nginx answering every POST
with a fixed five-event run), next to an nginx proxy hop to that agent measured in the same run.
Standard library only; needs nginx and redis-server (Debian). Linux only.

  benches/session_store.py [--binary target/release/dialect-proxy] [--sessions 200]
                           [--turns 3] [--rounds 3] [--results benches/RESULTS.md]

For every store, each round creates `--sessions` sessions one after the other, runs `--turns`
streamed turns on each (so histories grow: a commit appends to what is stored) and deletes
the session; stores take turns round by round, so drift on the machine hits each alike.
Measured by the client, one connection per request (`connection: close`, the same for nginx):

  create  POST /sessions, request to the end of the answer;
  start   POST /sessions/:id/turns, request to the `turn_start` event: the session read and
          locked, the input charged, the agent's answer begun;
  commit  `turn_start` to `turn_stop`: the agent's answer (one instant chunk) and the write
          back, which `turn_stop` waits for: the gateway ends a turn's stream only once the
          store holds the turn (the agent's last events wait with it, so the time between the
          last `text_delta` and `turn_stop` shows nothing);
  turn    the whole turn, request to the end of the stream;
  hop     a POST to the agent through nginx, request to the end of the answer.

Also read from each gateway's /metrics: the mean time of every store operation, measured inside
the gateway (`dialect_proxy_store_operation_seconds`). With --results, the report replaces its
own section of RESULTS.md (below the line benches/run keeps).
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

SECTION = "### Session stores: what each adds to a turn"
AGENT_RUN = "\n\n".join(
    "data: " + json.dumps(e, separators=(",", ":"))
    for e in [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hello"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
) + "\n\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, what, proc=None, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"{what} did not listen on {port}")


def request(port, method, path, body=b"", stream_marks=False):
    """One HTTP/1.1 request on a fresh connection. Returns (status, body, marks): marks are the
    monotonic times at which `turn_start` and `turn_stop` arrived."""
    head = (
        f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n"
        f"content-type: application/json\r\naccept: text/event-stream\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    marks = {}
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(head + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            now = time.monotonic()
            if not chunk:
                break
            data += chunk
            if stream_marks:
                if "start" not in marks and b"event: turn_start" in data:
                    marks["start"] = now
                if "stop" not in marks and b"event: turn_stop" in data:
                    marks["stop"] = now
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data.partition(b"\r\n\r\n")[2], marks


def timed(f):
    t0 = time.monotonic()
    out = f()
    return time.monotonic() - t0, out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Rig:
    """nginx (the agent and the hop) and redis-server, in one temporary directory."""

    def __init__(self, work):
        self.work = work
        self.agent, self.hop, self.redis = free_port(), free_port(), free_port()
        os.makedirs(f"{work}/nginx/logs")
        conf = f"""daemon off;
worker_processes 1;
pid {work}/nginx/nginx.pid;
error_log {work}/nginx/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {work}/nginx/cb; proxy_temp_path {work}/nginx/px;
  fastcgi_temp_path {work}/nginx/fc; uwsgi_temp_path {work}/nginx/uw; scgi_temp_path {work}/nginx/sc;
  server {{
    listen 127.0.0.1:{self.agent};
    location / {{ default_type text/event-stream; return 200 '{AGENT_RUN}'; }}
  }}
  server {{
    listen 127.0.0.1:{self.hop};
    location / {{
      proxy_pass http://127.0.0.1:{self.agent}; proxy_buffering off; proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"""
        with open(f"{work}/nginx/nginx.conf", "w") as f:
            f.write(conf)
        self.procs = [
            subprocess.Popen(
                ["nginx", "-p", f"{work}/nginx", "-e", f"{work}/nginx/logs/error.log",
                 "-c", f"{work}/nginx/nginx.conf"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ),
            subprocess.Popen(
                ["redis-server", "--port", str(self.redis), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", work],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ),
        ]
        wait_port(self.agent, "nginx")
        wait_port(self.redis, "redis-server")

    def close(self):
        for p in self.procs:
            p.terminate()
            p.wait()


class Gateway:
    def __init__(self, binary, rig, store, work):
        self.port, self.admin = free_port(), free_port()
        backend = {
            "memory": 'store = "memory"',
            "file": f'store = "file"\npath = "{work}/store-file"',
            "redis": f'store = "redis"\nurl = "redis://127.0.0.1:{rig.redis}/0"\nkey_prefix = "bench:"',
        }[store]
        config = f"""listen = "127.0.0.1:{self.port}"
admin_listen = "127.0.0.1:{self.admin}"

[[routes]]
path = "/v1"
client = "aap"
upstream = "http://127.0.0.1:{rig.agent}/agent"

[routes.aap]
name = "bench"

[sessions]
max_sessions_per_principal = 1000000
{backend}
"""
        path = f"{work}/{store}.toml"
        with open(path, "w") as f:
            f.write(config)
        self.proc = subprocess.Popen(
            [binary, "serve", "--config", path],
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/{store}.log", "w"),
        )
        wait_port(self.port, f"dialect-proxy ({store})", self.proc)

    def store_means(self):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/metrics").read().decode()
        sums, counts = {}, {}
        for m in re.finditer(
            r'^dialect_proxy_store_operation_seconds_(sum|count)\{op="(\w+)"\} (\S+)$', text, re.M
        ):
            (sums if m[1] == "sum" else counts)[m[2]] = float(m[3])
        return {op: sums[op] / counts[op] for op in sums if counts.get(op)}

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def one_session(port, turns, out):
    create = json.dumps({"agent": {"name": "bench"}}).encode()
    took, (status, body, _) = timed(lambda: request(port, "POST", "/v1/sessions", create))
    if status != 201 and status != 200:
        sys.exit(f"create: {status} {body[:300]!r}")
    out["create"].append(took)
    sid = json.loads(body)["sessionId"]
    turn = json.dumps({"stream": "delta", "messages": [{"role": "user", "content": "hi"}]}).encode()
    for _ in range(turns):
        t0 = time.monotonic()
        status, body, marks = request(port, "POST", f"/v1/sessions/{sid}/turns", turn, True)
        end = time.monotonic()
        if status != 200 or b'"stopReason":"end_turn"' not in body or len(marks) != 2:
            sys.exit(f"turn: {status} {marks} {body[:400]!r}")
        out["start"].append(marks["start"] - t0)
        out["commit"].append(marks["stop"] - marks["start"])
        out["turn"].append(end - t0)
    status, _, _ = request(port, "DELETE", f"/v1/sessions/{sid}")
    if status != 204:
        sys.exit(f"delete: {status}")


def report(stores, figures, hop, means, args):
    ms = lambda x: f"{x * 1000:.2f}"
    lines = [
        SECTION + f" ({time.strftime('%Y-%m-%d', time.gmtime())})",
        "",
        f"`benches/session_store.py --sessions {args.sessions} --turns {args.turns} "
        f"--rounds {args.rounds}` (run by `benches/run`): {args.rounds} rounds × "
        f"{args.sessions} sessions × {args.turns} streamed turns per store, each store in front "
        "of the same instant AG-UI agent (nginx); one connection per request. Milliseconds, "
        "p50 / p99 over every round.",
        "",
        "| | create | turn start | answer and commit (turn_start → turn_stop) | whole turn |",
        "|---|---|---|---|---|",
    ]
    for store in stores:
        f = figures[store]
        cell = lambda k: f"{ms(percentile(f[k], 50))} / {ms(percentile(f[k], 99))}"
        lines.append(
            f"| `{store}` | {cell('create')} | {cell('start')} | {cell('commit')} | {cell('turn')} |"
        )
    lines.append(
        f"| nginx hop to the agent (same run) | | | | {ms(percentile(hop, 50))} / {ms(percentile(hop, 99))} |"
    )
    lines += [
        "",
        "The `file` store fsyncs every write before it returns (redb, immediate durability); "
        "each `redis` operation is one or two scripts on a Redis on the same host (the "
        "session's slot, then the ledger's). A turn reads the session's configuration, takes "
        "the turn (lock and read), charges its input and writes the turn back: four operations.",
    ]
    ops = sorted({op for s in stores for op in means[s]})
    lines += [
        "",
        "Inside the gateway: mean time of each store operation "
        "(`dialect_proxy_store_operation_seconds`, sum / count), milliseconds.",
        "",
        "| op | " + " | ".join(f"`{s}`" for s in stores) + " |",
        "|---|" + "---|" * len(stores),
    ]
    for op in ops:
        row = [f"{means[s][op] * 1000:.3f}" if op in means[s] else "" for s in stores]
        lines.append(f"| {op} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def replace_section(path, text):
    with open(path) as f:
        old = f.read()
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        nxt = old.find("\n### ", start + 1)
        new = old[:start] + text + ("\n" + old[nxt + 1:] if nxt >= 0 else "")
    with open(path, "w") as f:
        f.write(new)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/dialect-proxy")
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results", help="RESULTS.md whose section to replace")
    ap.add_argument("--stores", default="memory,file,redis", help="stores to measure, in order")
    args = ap.parse_args()
    for tool in ("nginx", "redis-server"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (Debian: apt-get install {tool})")
    stores = args.stores.split(",")
    work = tempfile.mkdtemp(prefix="dp-store-bench-")
    rig = Rig(work)
    gateways = {}
    try:
        gateways = {s: Gateway(args.binary, rig, s, work) for s in stores}
        figures = {s: {"create": [], "start": [], "commit": [], "turn": []} for s in stores}
        hop = []
        run_input = json.dumps({"threadId": "t", "runId": "r", "messages": [
            {"id": "u", "role": "user", "content": "hi"}], "tools": [], "context": []}).encode()
        # Warm-up: a few sessions each, not counted.
        for s in stores:
            one_session(gateways[s].port, 1, {"create": [], "start": [], "commit": [], "turn": []})
        for r in range(args.rounds):
            order = stores[r % len(stores):] + stores[: r % len(stores)]
            for s in order:
                for _ in range(args.sessions):
                    one_session(gateways[s].port, args.turns, figures[s])
            for _ in range(args.sessions * args.turns):
                took, (status, _, _) = timed(lambda: request(rig.hop, "POST", "/agent", run_input))
                if status != 200:
                    sys.exit(f"nginx hop: {status}")
                hop.append(took)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        means = {s: gateways[s].store_means() for s in stores}
    finally:
        for g in gateways.values():
            g.close()
        rig.close()
        shutil.rmtree(work, ignore_errors=True)
    text = report(stores, figures, hop, means, args)
    print(text)
    if args.results:
        replace_section(args.results, text)


if __name__ == "__main__":
    main()
