#!/usr/bin/env python3
"""Session flood: what a burst of large AAP sessions does to the gateway's memory.

Starts the gateway as an AAP face in front of the built-in demo agent
(`serve --client aap --upstream builtin:demo --agent-name demo`), creates SESSIONS sessions
whose seed history is one user message of BYTES content bytes, deletes every session that was
created, and prints the gateway's resident size (VmRSS of /proc/<pid>/status) before the
flood, after it, and after the deletions (waiting WAIT seconds for freed memory to go back),
with the statuses the creations got.

With --raise-limits the gateway runs from a generated config file with the same route and
byte limits high enough for the whole flood (max_total_bytes, max_bytes_per_principal = 4 GiB),
to compare memory held and returned with a build that has no such limits.

With --keys the face requires API keys (DIALECT_PROXY_AAP_API_KEYS=attacker,victim): the flood
comes from `attacker`, and once it is over `victim` tries to create one session of its own,
which shows whether one principal's flood starves another.

Python 3 standard library only. Linux only (/proc).

    benches/session_flood.py                          # target/debug/dialect-proxy
    benches/session_flood.py --binary target/release/dialect-proxy --sessions 100 --bytes 7800000
    benches/session_flood.py --sessions 10000 --bytes 0 --keys   # fill the store with small ones
    benches/session_flood.py --raise-limits          # the whole flood stored
"""

import argparse
import collections
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

LISTENING = "dialect-proxy listening on http://"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


RAISED = """[[routes]]
path = "/"
client = "aap"
upstream = "builtin:demo"

[routes.aap]
name = "demo"
{keys}

[sessions]
max_total_bytes = 4294967296
max_bytes_per_principal = 4294967296
"""


def start(binary, keys, raise_limits):
    env = dict(os.environ)
    if keys:
        env["DIALECT_PROXY_AAP_API_KEYS"] = "attacker,victim"
    if raise_limits:
        config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        config.write(RAISED.format(keys='api_keys = ["attacker", "victim"]' if keys else ""))
        config.close()
        route = ["--config", config.name]
    else:
        route = ["--client", "aap", "--upstream", "builtin:demo", "--agent-name", "demo"]
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", *route],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=env, text=True)
    line = process.stdout.readline()
    if raise_limits:
        os.unlink(config.name)
    if not line.startswith(LISTENING):
        process.kill()
        sys.exit(f"unexpected first line from the gateway: {line!r}")
    # Drain stdout so the pipe never fills.
    threading.Thread(target=lambda: process.stdout.read(), daemon=True).start()
    host, port = line[len(LISTENING):].strip().rsplit(":", 1)
    return process, host, int(port)


def request(host, port, method, path, body=None, key=None):
    connection = http.client.HTTPConnection(host, port, timeout=120)
    headers = {"content-type": "application/json"} if body is not None else {}
    if key:
        headers["authorization"] = f"Bearer {key}"
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def error_text(data):
    try:
        return json.loads(data).get("error", "")
    except ValueError:
        return data[:200].decode("utf-8", "replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="target/debug/dialect-proxy")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--bytes", type=int, default=7_800_000,
                        help="content bytes of each session's seed history")
    parser.add_argument("--wait", type=float, default=5.0,
                        help="seconds to wait after the deletions before the last reading")
    parser.add_argument("--keys", action="store_true",
                        help="require API keys: flood as `attacker`, then create as `victim`")
    parser.add_argument("--raise-limits", action="store_true",
                        help="byte limits high enough for the whole flood (a config file)")
    args = parser.parse_args()

    process, host, port = start(args.binary, args.keys, args.raise_limits)
    attacker = "attacker" if args.keys else None
    try:
        time.sleep(0.5)
        before = rss_kib(process.pid)
        messages = [{"role": "user", "content": "x" * args.bytes}] if args.bytes else []
        body = json.dumps({"agent": {"name": "demo"}, "messages": messages}).encode()
        created, statuses, errors = [], collections.Counter(), {}
        started = time.monotonic()
        for _ in range(args.sessions):
            status, data = request(host, port, "POST", "/sessions", body, attacker)
            statuses[status] += 1
            if status == 201:
                created.append(json.loads(data)["sessionId"])
            else:
                errors.setdefault(status, error_text(data))
        flood_s = time.monotonic() - started
        peak = rss_kib(process.pid)
        victim = None
        if args.keys:
            # The victim asks for a session like the attacker's (a small one if those are empty).
            status, data = request(host, port, "POST", "/sessions", body, "victim")
            victim = (status, "" if status == 201 else error_text(data))
            if status == 201:
                session = json.loads(data)["sessionId"]
                request(host, port, "DELETE", f"/sessions/{session}", None, "victim")
        started = time.monotonic()
        for session in created:
            status, _ = request(host, port, "DELETE", f"/sessions/{session}", None, attacker)
            if status != 204:
                sys.exit(f"DELETE {session}: HTTP {status}")
        delete_s = time.monotonic() - started
        time.sleep(args.wait)
        after = rss_kib(process.pid)
    finally:
        process.kill()
        process.wait()

    mib = lambda kib: f"{kib / 1024:8.1f} MiB"
    print(f"binary: {args.binary}")
    print(f"flood: {args.sessions} creations x {args.bytes} content bytes"
          f"{' as key attacker' if args.keys else ' (no API keys: one anonymous principal)'}"
          f"{'; byte limits raised' if args.raise_limits else ''}")
    print(f"answers: " + ", ".join(f"{n} x HTTP {s}" for s, n in sorted(statuses.items())))
    for status, text in sorted(errors.items()):
        print(f"  first HTTP {status}: {text}")
    print(f"flood took {flood_s:.1f} s; deleting {len(created)} sessions took {delete_s:.1f} s")
    if victim:
        print(f"victim's creation after the flood: HTTP {victim[0]} {victim[1]}".rstrip())
    print()
    print("| moment | VmRSS |")
    print("| --- | --- |")
    print(f"| before the flood | {mib(before)} |")
    print(f"| after the flood ({len(created)} sessions stored) | {mib(peak)} |")
    print(f"| {args.wait:g} s after deleting them | {mib(after)} |")


if __name__ == "__main__":
    main()
