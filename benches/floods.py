#!/usr/bin/env python3
"""Hostile-client floods against a dialect-proxy binary: what the gateway's memory and
descriptors do under them. Standard library only; Linux (/proc) only.

  benches/floods.py [--binary target/debug/dialect-proxy] [bodies] [idle]

bodies: CONNECTIONS clients (default 150) each send the head of a POST declaring
    BODY_MIB MiB (default 8, the default max_request_bytes) and all of the body but its last
    KiB, then hold the connection. Reports the gateway's RSS at rest, during the flood and at
    its peak (VmHWM), and how many clients got 503 (OVERLOADED) before sending their body.

idle: IDLE clients (default 3000) connect and send nothing, against a gateway whose
    descriptor limit is NOFILE (default 1024). Then one legitimate request on a fresh
    connection: whether and when it is answered, the gateway's CPU time over the flood, and
    how many `accept failed` lines it logged.

Run it against two binaries to compare (e.g. one built from an earlier commit):

  benches/floods.py --binary /tmp/old/dialect-proxy bodies idle
  benches/floods.py --binary target/release/dialect-proxy bodies idle
"""

import argparse
import os
import resource
import select
import socket
import subprocess
import threading
import time

RUN_INPUT = (
    b'{"threadId":"flood","runId":"r","messages":[{"id":"u1","role":"user",'
    b'"content":"hello"}],"tools":[],"context":[]}'
)


class Gateway:
    """`dialect-proxy serve` on 127.0.0.1:0 with builtin:demo, logs collected from stderr."""

    def __init__(self, binary, extra=(), nofile=None):
        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--upstream", "builtin:demo", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limit,
        )
        line = self.proc.stdout.readline().decode()
        prefix = "dialect-proxy listening on http://"
        if not line.startswith(prefix):
            raise SystemExit(f"unexpected first line {line!r}")
        host, port = line[len(prefix):].strip().rsplit(":", 1)
        self.addr = (host, int(port))
        self.log = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line.decode(errors="replace"))

    def status_kib(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def mib(kib):
    return f"{kib / 1024:.0f} MiB"


def request_head(addr, length):
    return (
        f"POST / HTTP/1.1\r\nhost: {addr[0]}:{addr[1]}\r\ncontent-type: application/json\r\n"
        f"content-length: {length}\r\n\r\n"
    ).encode()


def bodies(binary, connections, body_mib):
    gw = Gateway(binary)
    time.sleep(0.5)
    rest = gw.status_kib("VmRSS")
    length = body_mib << 20
    body = RUN_INPUT + b" " * (length - len(RUN_INPUT))
    head = request_head(gw.addr, length)
    results = {}
    sent = threading.Barrier(connections + 1)
    release = threading.Event()

    def client(i):
        status = "admitted"
        try:
            s = socket.create_connection(gw.addr)
            s.sendall(head + body[:1024])
            # A refusal comes at once, before the body; give it a moment to arrive.
            readable, _, _ = select.select([s], [], [], 0.5)
            if readable:
                status = s.recv(64).split(b" ")[1].decode() or "closed"
            else:
                s.sendall(body[1024 : length - 1024])
        except OSError as e:
            status = f"error: {e.strerror}"
        results[i] = status
        sent.wait()
        release.wait()
        s.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(connections)]
    started = time.monotonic()
    for t in threads:
        t.start()
    sent.wait()
    sending = time.monotonic() - started
    time.sleep(1.0)  # let the gateway read what the kernel buffered
    samples = []
    for _ in range(3):
        samples.append(gw.status_kib("VmRSS"))
        time.sleep(0.2)
    flood = max(samples)
    peak = gw.status_kib("VmHWM")
    release.set()
    for t in threads:
        t.join()
    gw.stop()
    counts = {}
    for status in results.values():
        counts[status] = counts.get(status, 0) + 1
    print(f"bodies: {connections} clients x {body_mib} MiB declared, all but 1 KiB sent ({sending:.1f} s)")
    print(f"  RSS at rest {mib(rest)}, during the flood {mib(flood)}, peak {mib(peak)}")
    print(f"  outcomes: {dict(sorted(counts.items()))}")


def idle(binary, clients, nofile, wait, settle):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    gw = Gateway(binary, nofile=nofile)
    time.sleep(0.5)
    socks = []
    for _ in range(clients):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(gw.addr)  # completes in the background (or waits in the SYN queue)
        socks.append(s)
    # Connections beyond the listen backlog complete only as SYNs are retried.
    time.sleep(settle)
    fds = len(os.listdir(f"/proc/{gw.proc.pid}/fd"))
    cpu0, t0, logged0 = gw.cpu_seconds(), time.monotonic(), len(gw.log)
    body = RUN_INPUT
    answer = "not answered"
    try:
        legit = socket.create_connection(gw.addr, timeout=wait)
        legit.settimeout(wait)
        legit.sendall(request_head(gw.addr, len(body)) + body)
        first = legit.recv(64)
        answer = first.split(b"\r\n")[0].decode() or "closed"
        legit.close()
    except OSError as e:
        answer = f"not answered ({e.strerror or e})"
    took = time.monotonic() - t0
    cpu = gw.cpu_seconds() - cpu0
    failures = sum("accept failed" in line for line in gw.log[logged0:])
    failures_total = sum("accept failed" in line for line in gw.log)
    states = {"closed by the gateway": 0, "open": 0, "not connected": 0}
    for s in socks:
        try:
            state = "closed by the gateway" if s.recv(1) == b"" else "open"
        except BlockingIOError:
            state = "open"
        except ConnectionResetError:
            state = "closed by the gateway"
        except OSError:
            state = "not connected"
        states[state] += 1
    gw.stop()
    for s in socks:
        s.close()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(f"idle: {clients} silent clients, gateway nofile {nofile}, legitimate request {settle:.0f} s later")
    print(f"  gateway descriptors in use when the request was sent: {fds}")
    print(f"  legitimate request: {answer} after {took:.1f} s (gave up at {wait:.0f} s)")
    print(f"  gateway CPU {cpu:.2f} s over those {took:.1f} s; 'accept failed' lines: {failures} then, {failures_total} in all")
    print(f"  silent connections at the end: {states}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default="target/debug/dialect-proxy")
    parser.add_argument("--connections", type=int, default=150)
    parser.add_argument("--body-mib", type=int, default=8)
    parser.add_argument("--idle-clients", type=int, default=3000)
    parser.add_argument("--nofile", type=int, default=1024)
    parser.add_argument("--wait", type=float, default=30.0, help="how long the legitimate request may wait")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between the idle clients' connects and the legitimate request")
    parser.add_argument("floods", nargs="*", help="bodies, idle (default: both)")
    args = parser.parse_args()
    args.floods = args.floods or ["bodies", "idle"]
    if set(args.floods) - {"bodies", "idle"}:
        parser.error("floods are: bodies, idle")
    print(f"binary: {args.binary}")
    for flood in args.floods:
        if flood == "bodies":
            bodies(args.binary, args.connections, args.body_mib)
        else:
            idle(args.binary, args.idle_clients, args.nofile, args.wait, args.settle)


if __name__ == "__main__":
    main()
