#!/usr/bin/env python3
"""Summarises what jemalloc said of itself while the gateway ran the soak
(benches/allocator_profile.sh) as Markdown: its own counts over time beside the RSS the
benchmark sampled, their least-squares slopes over the soak's second half, and, for every
step in its active pages over the second half, the size classes that took the pages.

jemalloc prints its statistics to the gateway's stderr (the benchmark's gateway log) each time
another `stats_interval` bytes have been allocated, with the time since the process started
(the soak starts within a second of it). The counts, in jemalloc's words:
- allocated: bytes the program holds (its live heap);
- active: pages of the slabs and extents that hold them (a slab with one live region stays);
- resident: pages the allocator has touched and not given back, its metadata included;
- metadata: the allocator's own structures.
RSS that follows `allocated` is the program's; RSS that follows `active` while `allocated`
stays flat is the allocator's spread over more pages.

    allocator_summary.py LOG CSV --duration SECONDS [--command TEXT] [--commit SHA]
"""

import argparse
import os
import re

# The least-squares slope heap_summary.py (the heaptrack counterpart) already computes.
from heap_summary import slope

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z ")
TOTALS = re.compile(
    r"^Allocated: (\d+), active: (\d+), metadata: (\d+) \(n_thp \d+\), resident: (\d+), "
    r"mapped: (\d+), retained: (\d+)"
)
UPTIME = re.compile(r"^uptime: (\d+)")
# The soak's gateway is the last one the benchmark started (it qualifies one before): its
# first log line.
START = "async runtime"
PAGE = os.sysconf("SC_PAGE_SIZE")


def read_log(path):
    """The prints of the last gateway started: (seconds since it started, totals, {class:
    active bytes}), timed by the merged arena's `uptime` (nanoseconds since the process made
    its first arena, at start-up)."""
    prints, current, section = [], None, None
    for line in open(path, errors="replace"):
        if START in line and STAMP.match(line):
            prints = []
            continue
        if "Begin jemalloc statistics" in line:
            current, section = [None, None, {}], None
            continue
        if current is None:
            continue
        if "End jemalloc statistics" in line:
            if None not in current[:2]:
                prints.append(current)
            current = None
            continue
        m = TOTALS.match(line)
        if m:
            keys = ("allocated", "active", "metadata", "resident", "mapped", "retained")
            current[1] = dict(zip(keys, (int(x) for x in m.groups())))
            continue
        m = UPTIME.match(line)
        if m:
            current[0] = int(m.group(1)) / 1e9
            continue
        if line.startswith("bins:"):
            section = "bins"
            continue
        if line.startswith("large:"):
            section = "large"
            continue
        f = line.split()
        if not f or not f[0].isdigit():
            continue
        size = int(f[0])
        if section == "bins" and len(f) > 14:
            # curslabs × pages per slab
            current[2][f"{size} B"] = int(f[11]) * int(f[14]) * PAGE
        elif section == "large" and len(f) > 2:
            current[2][f"{size} B (large)"] = int(f[2])
    return prints


def read_rss(path):
    rows = []
    for line in open(path).read().split()[1:]:
        t, rss = line.split(",")
        rows.append((float(t), float(rss)))
    return rows


def kib(n):
    return f"{n / 1024:,.0f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("csv")
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--command", default="benches/allocator_profile.sh")
    ap.add_argument("--commit", default="unknown")
    args = ap.parse_args()
    prints = read_log(args.log)
    rss = read_rss(args.csv)
    T = args.duration
    half = [p for p in prints if T / 2 <= p[0] <= T]
    if len(half) < 2:
        raise SystemExit(f"{args.log}: fewer than two jemalloc prints in the second half")

    print("# jemalloc under the soak\n")
    print(
        "The soak (scenario g of the end-to-end benchmark) with the gateway on its own "
        "allocator, jemalloc, built with its statistics (`--features jemalloc-stats`) and made "
        "to print them every 64 MiB allocated (8 MiB with `--quick`); written by `benches/allocator_profile.sh` "
        "(`benches/allocator_summary.py`). *allocated* is what the program holds, *active* the "
        "pages of the slabs and extents holding it, *resident* what the allocator has touched "
        "and not given back. RSS that follows *allocated* is the program's; RSS that follows "
        "*active* while *allocated* stays flat is the allocator's.\n"
    )
    print(f"- command: `{args.command}`")
    print(f"- git commit: {args.commit}")
    print(f"- prints: {len(prints)}, {len(half)} of them in the second half\n")

    print("## Over time\n")
    print("In KiB; the RSS is the benchmark's sample nearest to each time.\n")
    print("| seconds | RSS | allocated | active | resident | metadata |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    step = max(int(T) // 20, 1)
    for at in range(step * 2, int(T) + 1, step):
        p = min(prints, key=lambda p: abs(p[0] - at))
        r = min(rss, key=lambda r: abs(r[0] - at))
        t = p[1]
        print(
            f"| {at} | {r[1]:,.0f} | {kib(t['allocated'])} | {kib(t['active'])} | "
            f"{kib(t['resident'])} | {kib(t['metadata'])} |"
        )

    print("\n## Slopes over the second half\n")
    print("| count | slope (KiB/s) |")
    print("| --- | ---: |")
    rss_half = [(t, v) for t, v in rss if T / 2 <= t <= T]
    print(f"| RSS (sampled every second) | {slope(rss_half):+.3f} |")
    for key in ("allocated", "active", "resident", "metadata"):
        s = slope([(p[0], p[1][key] / 1024) for p in half])
        print(f"| {key} | {s:+.3f} |")

    print("\n## Steps in the active pages over the second half\n")
    print(
        "Every rise of 128 KiB or more between two prints, and the size classes whose pages "
        "grew most between them.\n"
    )
    steps = 0
    for a, b in zip(half, half[1:]):
        grew = b[1]["active"] - a[1]["active"]
        if grew < 128 * 1024:
            continue
        steps += 1
        classes = sorted(
            ((b[2].get(k, 0) - a[2].get(k, 0), k) for k in set(a[2]) | set(b[2])),
            reverse=True,
        )
        top = ", ".join(f"{k} +{kib(d)} KiB" for d, k in classes[:3] if d > 0)
        print(
            f"- {a[0]:.0f}–{b[0]:.0f} s: active +{kib(grew)} KiB, allocated "
            f"{(b[1]['allocated'] - a[1]['allocated']) / 1024:+,.0f} KiB; {top or 'no class grew'}"
        )
    if steps == 0:
        print("- none")

    first, last = half[0], half[-1]
    print(
        f"\n## Size classes over the second half ({first[0]:.0f} s to {last[0]:.0f} s)\n"
    )
    print("| size class | active at the start (KiB) | change (KiB) |")
    print("| --- | ---: | ---: |")
    changes = sorted(
        (
            (last[2].get(k, 0) - first[2].get(k, 0), k)
            for k in set(first[2]) | set(last[2])
        ),
        key=lambda c: (-abs(c[0]), c[1]),
    )
    for d, k in changes[:10]:
        print(f"| {k} | {kib(first[2].get(k, 0))} | {d / 1024:+,.0f} |")


if __name__ == "__main__":
    main()
