#!/usr/bin/env python3
"""The graceful-shutdown sequence, timed: dialect-proxy on SIGTERM next to nginx on SIGQUIT
(its graceful stop), each in front of the same upstream. Standard library only; Linux only.

  benches/shutdown.py [--binary target/release/dialect-proxy] [--runs 10] [--drain-ms 1000]

Each run starts the proxy, opens one stream through it (the upstream sends its headers and one
event, then stays silent) and one request whose upstream never sends headers, then signals the
proxy and measures, from the signal:

  refused   when a new TCP connect is first refused (the listener closed);
  waiting   what the request still waiting for upstream headers got, and when;
  stream    how the open stream ended (a terminal event, or cut), and when;
  exit      when the process exited.

Both get the same deadline: dialect-proxy `--drain-timeout`, nginx `worker_shutdown_timeout`.
Reports the median and the maximum over the runs.
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time

RUN_INPUT = (
    b'{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user",'
    b'"content":"hello"}],"tools":[],"context":[]}'
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Upstream:
    """`/stream`: SSE headers and RUN_STARTED, then silence; `/wait`: never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        if data.split(b" ", 2)[1].endswith(b"/wait"):
            return  # holds the connection, never answers
        event = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n" % (len(event), event)
        )


def post(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(
        b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"accept: text/event-stream\r\ncontent-length: %d\r\n\r\n%s"
        % (path.encode(), len(RUN_INPUT), RUN_INPUT)
    )
    return s


def read_until_closed(s, since, out):
    """Reads until EOF or reset; records (seconds from `since`, bytes, clean)."""
    data = b""
    clean = True
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        clean = False
    out.append((time.monotonic() - since[0], data, clean))


def time_until_refused(port, since, limit=5.0):
    while time.monotonic() - since < limit:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            return time.monotonic() - since
        except OSError:
            pass
        time.sleep(0.001)
    return None


class Gateway:
    name = "dialect-proxy"

    def __init__(self, binary, upstream_port, drain_ms, workdir):
        config = os.path.join(workdir, "gateway.toml")
        with open(config, "w") as f:
            for path in ("/stream", "/wait"):
                f.write(
                    f'[[routes]]\npath = "{path}"\nclient = "ag-ui"\n'
                    f'upstream = "http://127.0.0.1:{upstream_port}{path}"\n\n'
                )
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--config", config,
             "--drain-timeout", f"{drain_ms}ms"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        line = self.proc.stdout.readline().decode()
        self.port = int(line.strip().rsplit(":", 1)[1])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout):
        return self.proc.wait(timeout)


class Nginx:
    name = "nginx"

    def __init__(self, binary, upstream_port, drain_ms, workdir):
        self.port = free_port()
        prefix = os.path.join(workdir, "nginx")
        os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(
                f"daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
                f"error_log {prefix}/logs/error.log warn;\n"
                f"worker_shutdown_timeout {drain_ms}ms;\n"
                "events { worker_connections 1024; }\n"
                "http {\n access_log off;\n"
                f" client_body_temp_path {prefix}/cb; proxy_temp_path {prefix}/px;\n"
                f" fastcgi_temp_path {prefix}/fc; uwsgi_temp_path {prefix}/uw;"
                f" scgi_temp_path {prefix}/sc;\n"
                f" server {{ listen 127.0.0.1:{self.port};\n"
                f"  location / {{ proxy_pass http://127.0.0.1:{upstream_port};"
                " proxy_buffering off; proxy_http_version 1.1; proxy_read_timeout 3600s; }\n"
                " }\n}\n"
            )
        self.proc = subprocess.Popen(
            [binary, "-p", prefix, "-e", f"{prefix}/logs/error.log", "-c", conf],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.01)
        raise SystemExit("nginx did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)

    def wait(self, timeout):
        return self.proc.wait(timeout)


def one_run(kind, binary, drain_ms):
    upstream = Upstream()
    with tempfile.TemporaryDirectory() as workdir:
        proxy = kind(binary, upstream.port, drain_ms, workdir)
        stream = post(proxy.port, "/stream")
        head = b""
        while b"RUN_STARTED" not in head:
            head += stream.recv(65536)
        waiting = post(proxy.port, "/wait")
        time.sleep(0.2)  # both requests are at the upstream
        since = [0.0]
        results = {"stream": [], "waiting": []}
        threads = [
            threading.Thread(target=read_until_closed, args=(stream, since, results["stream"])),
            threading.Thread(target=read_until_closed, args=(waiting, since, results["waiting"])),
        ]
        since[0] = time.monotonic()
        proxy.stop()
        for t in threads:
            t.start()
        refused = time_until_refused(proxy.port, since[0])
        try:
            proxy.wait(timeout=drain_ms / 1000 + 10)
            exited = time.monotonic() - since[0]
        except subprocess.TimeoutExpired:
            proxy.proc.kill()
            exited = None
        for t in threads:
            t.join(timeout=5)
        upstream.sock.close()
    (s_t, s_data, s_clean), = results["stream"] or [(None, b"", False)]
    (w_t, w_data, _), = results["waiting"] or [(None, b"", False)]
    return {
        "refused": refused,
        "exit": exited,
        "stream_end": s_t,
        "stream_terminal": b"RUN_ERROR" in s_data and b"GATEWAY_SHUTDOWN" in s_data
        and s_data.endswith(b"0\r\n\r\n") and s_clean,
        "waiting_end": w_t,
        "waiting_status": (w_data.split(b" ", 2)[1].decode() if w_data.startswith(b"HTTP/")
                           else "no response"),
    }


def ms(values):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"{statistics.median(values) * 1000:.1f} / {max(values) * 1000:.1f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/dialect-proxy")
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--drain-ms", type=int, default=1000)
    args = parser.parse_args()
    kinds = [(Gateway, args.binary)]
    if os.path.exists(args.nginx):
        kinds.append((Nginx, args.nginx))
    else:
        print("nginx not found: only dialect-proxy is measured")
    print(f"{args.runs} runs each, deadline {args.drain_ms} ms; times from the signal, "
          "median / max in ms\n")
    print("| proxy | new connection refused | waiting request answered | its answer "
          "| open stream ended | stream's end | process exited |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, binary in kinds:
        runs = [one_run(kind, binary, args.drain_ms) for _ in range(args.runs)]
        answers = sorted({r["waiting_status"] for r in runs})
        terminal = sum(r["stream_terminal"] for r in runs)
        print(f"| {kind.name} | {ms(r['refused'] for r in runs)} "
              f"| {ms(r['waiting_end'] for r in runs)} | {', '.join(answers)} "
              f"| {ms(r['stream_end'] for r in runs)} "
              f"| terminal event {terminal}/{len(runs)}, else cut "
              f"| {ms(r['exit'] for r in runs)} |")


if __name__ == "__main__":
    main()
