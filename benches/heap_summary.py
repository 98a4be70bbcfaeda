#!/usr/bin/env python3
"""Summarises a heaptrack recording of the gateway under the soak (benches/heap_profile.sh) as
Markdown: the live heap over time and its least-squares slope over the soak's second half, what
grew over the second half by allocating backtrace, and what was still allocated when the
process ended. Memory kept per stream served grows all along and its backtrace allocated once per
stream; a pool sized by the peak of concurrent streams grows once and stays.

    heap_summary.py RECORDING.zst --duration SECONDS [--command TEXT] [--commit SHA]
"""

import argparse
import re
import subprocess
import sys

# Frames that say nothing about who allocated: the allocator, collections growing, std glue.
NOISE = re.compile(
    r"^(alloc::|_RNv|core::|std::|hashbrown::|__rust|<alloc::|<core::|<std::|"
    r"_\$LT\$alloc|_\$LT\$core|_\$LT\$std)"
)
HASH = re.compile(r"::h[0-9a-f]{16}$")


def heaptrack_print(recording, *args):
    out = subprocess.run(
        ["heaptrack_print", "-f", recording, *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def heap_series(recording, massif_path):
    heaptrack_print(recording, "--print-massif", massif_path, "-s", "0", "-a", "0", "-T", "0",
                    "-p", "0", "-l", "0")
    series, time = [], None
    with open(massif_path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("time="):
                time = float(line[5:])
            elif line.startswith("mem_heap_B=") and time is not None:
                series.append((time, int(line[11:]) / 1024))
    return series


def slope(points):
    n = len(points)
    if n < 2:
        return 0.0
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    d = n * sxx - sx * sx
    return 0.0 if d == 0 else (n * sxy - sx * sy) / d


def live_entries(recording):
    """heaptrack's list of what was still allocated at the end of `recording`, one entry per
    allocating backtrace: live bytes (as printed and as a number), how many allocations that
    backtrace made in all, and its frames past the allocator."""
    text = heaptrack_print(recording, "-l", "1", "-n", "5000", "-s", "0", "-a", "0", "-T", "0",
                           "-p", "0", "--merge-backtraces", "0")
    head = re.compile(r"^(\S+) leaked over (\d+) calls from")
    entries, current = [], None
    for line in text.splitlines():
        m = head.match(line)
        if m:
            current = {"shown": m.group(1), "bytes": size(m.group(1)),
                       "calls": int(m.group(2)), "frames": []}
            entries.append(current)
            continue
        frame = line.strip()
        if not frame:
            current = None
        elif current is not None and not frame.startswith(("at ", "in ", "and ")) \
                and not NOISE.match(frame):
            current["frames"].append(tidy(frame))
    return entries


def live_by_backtrace(recording):
    """Live bytes per allocating backtrace, named by its first frames past the allocator."""
    live = {}
    for entry in live_entries(recording):
        name = " … ".join(entry["frames"][:4]) or "(allocator only)"
        live[name] = live.get(name, 0) + entry["bytes"]
    return live


def named(entry):
    """The first frame past the allocator (what grew) and the first of the gateway's own (on
    whose behalf)."""
    frames = entry["frames"][:1]
    own = next((f for f in entry["frames"][1:] if f.startswith("dialect_proxy::")), None)
    return frames + ([own] if own else [])


def truncated(recording, seconds, path):
    """The recording up to `seconds` (its records are in time order, `c <hex ms>` marking the
    clock), written to `path`: heaptrack_print then reads what was live at that moment as
    "leaked"."""
    limit = int(seconds * 1000)
    source = subprocess.Popen(["zstd", "-dc", recording], stdout=subprocess.PIPE)
    sink = subprocess.Popen(["zstd", "-q", "-f", "-o", path], stdin=subprocess.PIPE)
    for line in source.stdout:
        if line.startswith(b"c ") and int(line[2:], 16) >= limit:
            break
        sink.stdin.write(line)
    source.kill()
    source.wait()
    sink.stdin.close()
    sink.wait()


def size(text):
    m = re.match(r"([\d.]+)([KMG]?)B?$", text)
    if not m:
        return 0
    return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]


def tidy(frame):
    frame = HASH.sub("", frame).replace("$LT$", "<").replace("$GT$", ">")
    frame = frame.replace("$u20$", " ").replace("$C$", ",").replace("$u7b$", "{")
    frame = frame.replace("$u7d$", "}").replace("..", "::").replace("$u2b$", "+")
    return frame.replace("$u5b$", "[").replace("$u5d$", "]").lstrip("_")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("recording")
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--command", default="benches/heap_profile.sh")
    parser.add_argument("--commit", default="unknown", help="the commit the gateway was built at")
    parser.add_argument("--massif", default="/tmp/heap_summary.massif")
    args = parser.parse_args()

    series = heap_series(args.recording, args.massif)
    if not series:
        sys.exit("no heap samples in the recording")
    half, end = args.duration / 2, args.duration
    second = [(t, kib) for t, kib in series if half <= t <= end]
    at = lambda t: next((kib for s, kib in series if s >= t), series[-1][1])  # noqa: E731
    summary = heaptrack_print(args.recording, "-s", "0", "-a", "0", "-T", "0", "-p", "0",
                              "-l", "0")
    totals = [line for line in summary.splitlines()
              if re.match(r"^(total runtime|calls to allocation|peak heap|total memory leaked)",
                          line)]

    print("# Heap of the gateway under the soak\n")
    print("The soak (scenario g of the end-to-end benchmark) with the gateway built on the system "
          "allocator and run under heaptrack, which records every allocation and free; written "
          "by `benches/heap_profile.sh` (`benches/heap_summary.py`). The heap is what the "
          "program holds, without the allocator's own pages, so a slope here is the program's "
          "and one only in RSS is the allocator's.\n")
    print(f"- command: `{args.command}`")
    print(f"- git commit: {args.commit}")
    for line in totals:
        print(f"- {line.strip()}")
    print()
    print("## Live heap over time\n")
    print("| seconds | live heap |")
    print("| ---: | ---: |")
    step = max(args.duration / 10, 1)
    t = 0.0
    while t <= end:
        print(f"| {t:.0f} | {at(t):,.0f} KiB |")
        t += step
    print(f"\nLeast-squares slope of the live heap over the second half ({half:.0f}–{end:.0f} s, "
          f"{len(second):,} samples): **{slope(second):+.3f} KiB/s**.\n")
    print("## What grew over the second half\n")
    print(f"Live bytes by allocating backtrace at {half:.0f} s and at {end:.0f} s (the "
          "recording cut at each moment), the largest changes. A pool reaching a new peak of "
          "concurrency grows once and stays; a buffer kept per connection that creeps up with "
          "reuse grows all along.\n")
    cut = args.massif + ".cut.zst"
    truncated(args.recording, half, cut)
    before = live_by_backtrace(cut)
    truncated(args.recording, end, cut)
    after = live_by_backtrace(cut)
    changes = sorted(((after.get(k, 0) - before.get(k, 0), k) for k in set(before) | set(after)),
                     key=lambda change: abs(change[0]), reverse=True)
    print(f"| change | live at {end:.0f} s | allocated by |")
    print("| ---: | ---: | --- |")
    for change, name in changes[:8]:
        print(f"| {change / 1024:+,.0f} KiB | {after.get(name, 0) / 1024:,.0f} KiB | `{name}` |")
    print()
    print("## Still allocated when the process ended, by allocations made\n")
    print("After the soak's last streams had ended and the gateway had shut down gracefully: "
          "each backtrace with memory still allocated, and how many allocations it made over "
          "the whole run. One that allocates per stream served would have made hundreds of "
          "thousands; a pool sized by the peak of concurrent streams makes about as many as "
          "were open at once.\n")
    print("| allocations | still allocated | allocated by |")
    print("| ---: | ---: | --- |")
    entries = sorted(live_entries(args.recording), key=lambda e: e["calls"], reverse=True)
    for entry in entries[:8]:
        frames = " … in ".join(f"`{f}`" for f in named(entry)) or "(allocator only)"
        print(f"| {entry['calls']:,} | {entry['shown']} | {frames} |")


if __name__ == "__main__":
    main()
