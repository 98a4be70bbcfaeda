#!/usr/bin/env python3
"""Summarises the `perf record -g` data that `benches/profile.sh` gathers (scenario a of the
end-to-end benchmark, one data file per process in the middle, each with a JSON side file
naming the comparator and the events it passed) as Markdown on stdout: per process the CPU
time per event, kernel against user time, the share spent inside syscalls and by which
syscall, user time by crate (and by module of the gateway's own crate), and the symbols with
the most self time.

    benches/perf_summary.py DIR [--command TEXT] [--top N]

Callchains are frame-pointer ones: complete in the kernel, where a syscall's entry point is
always on the stack, but cut short in user code built without frame pointers, so user time is
attributed by self time (the sampled frame) only.
"""

import argparse
import collections
import json
import pathlib
import platform
import re
import subprocess
import sys
from datetime import datetime, timezone

KERNEL_DSO = "[kernel.kallsyms]"
SYSCALL_ENTRY = re.compile(r"^(entry_SYSCALL_64|do_syscall_64)")
KERNEL_SYS = re.compile(r"^(?:__x64_sys_|__ia32_sys_|__se_sys_|__do_sys_)(\w+)")
# Frames that mark an interrupt or softirq taken outside any syscall.
INTERRUPT_FRAMES = (
    "asm_sysvec_", "sysvec_", "asm_common_interrupt", "common_interrupt", "handle_softirqs",
    "__do_softirq", "do_softirq", "irq_exit",
)
# libc's wrappers: __GI___writev, __libc_recv, __GI___libc_write, epoll_wait...
LIBC_PREFIX = re.compile(r"^(?:__GI_)?(?:__libc_|__)*")


class Sample:
    __slots__ = ("comm", "period", "frames")

    def __init__(self, comm, period):
        self.comm = comm
        self.period = period
        self.frames = []  # (ip, symbol, dso), innermost first


def samples(data):
    """Every sample of a perf data file, parsed from `perf script`."""
    out = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "comm,tid,period,ip,sym,dso"],
        capture_output=True, text=True, errors="replace", check=True,
    ).stdout
    current = None
    for line in out.splitlines():
        if not line.strip():
            if current is not None:
                yield current
            current = None
            continue
        if not line.startswith(("\t", " ")) or current is None:
            # Header: COMM TID PERIOD (the command may contain spaces).
            words = line.split()
            try:
                period = int(words[-1])
            except (ValueError, IndexError):
                continue
            current = Sample(" ".join(words[:-2]), period)
            continue
        m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            current.frames.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if current is not None:
        yield current


def is_kernel(frame):
    ip, _, dso = frame
    return dso == KERNEL_DSO or ip >= 0xFFFF800000000000


def syscall_of(sample):
    """The syscall a sample is inside of, or None."""
    frames = sample.frames
    for i, (_, sym, _) in enumerate(frames):
        if SYSCALL_ENTRY.match(sym):
            for _, s, _ in frames[:i]:
                m = KERNEL_SYS.match(s)
                if m:
                    return m.group(1)
            # The libc wrapper that entered the kernel is the first user frame after it.
            for _, s, dso in frames[i + 1:]:
                if s.startswith(("entry_SYSCALL", "do_syscall")):
                    continue
                if "libc" in dso and s and s != "[unknown]":
                    name = LIBC_PREFIX.sub("", s)
                    return name or s
                break
            return "(unresolved)"
    return None


def crate_of(symbol, dso):
    """The crate (or library) a user symbol belongs to; the gateway's own crate by module."""
    if "libc" in dso:
        return "libc"
    if symbol.startswith(("_rjem_", "je_", "tikv_jemalloc")) or "jemalloc" in symbol:
        return "jemalloc (allocator)"
    if symbol in ("", "[unknown]"):
        return f"unresolved ({pathlib.Path(dso).name})"
    # `<hyper::proto::h1::role::Server as ...>::encode` -> hyper; `core::ptr::drop_in_place<...>`
    # is the standard library dropping something: keep it as core.
    text = symbol.lstrip("<&*")
    text = re.sub(r"^(?:mut |dyn |const )+", "", text)
    parts = re.split(r"::|<| as ", text)
    crate = parts[0] if parts and parts[0] else "?"
    if crate == "dialect_proxy" and len(parts) > 1:
        return f"dialect_proxy::{parts[1]}"
    if "::" not in symbol and not symbol.startswith("<"):
        return f"C symbols ({pathlib.Path(dso).name})"
    return crate


def pct(part, whole):
    return f"{100.0 * part / whole:.1f} %" if whole else "–"


def summarise(data, top):
    side = data.with_suffix(".json")
    meta = json.loads(side.read_text()) if side.exists() else {}
    total = 0
    kernel = user = in_sys = 0
    by_sys = collections.Counter()
    by_crate = collections.Counter()
    by_symbol = collections.Counter()
    kernel_other = collections.Counter()
    n = 0
    for s in samples(data):
        if not s.frames:
            continue
        n += 1
        total += s.period
        leaf = s.frames[0]
        sys_name = syscall_of(s)
        if sys_name is not None:
            in_sys += s.period
            by_sys[sys_name] += s.period
        if is_kernel(leaf):
            kernel += s.period
            by_symbol[("k", leaf[1])] += s.period
            if sys_name is None:
                # Kernel time outside any syscall: page faults, interrupts, softirqs.
                names = [f[1] for f in s.frames]
                if any(x.endswith("exc_page_fault") for x in names):
                    kernel_other["page faults"] += s.period
                elif any(x.startswith(INTERRUPT_FRAMES) for x in names):
                    kernel_other["interrupts and softirqs"] += s.period
                else:
                    kernel_other["other"] += s.period
        else:
            user += s.period
            by_symbol[("u", leaf[1] or "[unknown]")] += s.period
            by_crate[crate_of(leaf[1], leaf[2])] += s.period
    return meta, n, total, kernel, user, in_sys, by_sys, by_crate, by_symbol, kernel_other


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=pathlib.Path)
    parser.add_argument("--command", default="benches/profile.sh")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    files = sorted(args.dir.glob("*.data"))
    if not files:
        sys.exit(f"no perf data in {args.dir}")

    def shell(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "unknown"

    out = []
    w = out.append
    w("# Profile of the per-event path\n")
    w(
        "Scenario a of the end-to-end benchmark (a new stream every 10 ms, 100 events each 10 ms "
        "apart, one event per HTTP chunk: about 100 open streams and 10,000 events/s) with "
        "`perf record -g` (cpu-clock, 4 kHz) attached to the process in the middle for the whole "
        "schedule, warm-up included; the process pinned alone on CPU 1 as in the benchmark, "
        "perf, the load generator and the mock on CPU 0. Written by `benches/profile.sh` "
        "(`benches/perf_summary.py`); the figures of that run are in `target/e2e/profile-run.md`.\n"
    )
    w(f"- command: `{args.command}`")
    w(f"- git commit: {shell('git', 'rev-parse', 'HEAD')}")
    w(f"- kernel: {platform.release()}; {shell('perf', '--version')}")
    w(f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}")
    try:
        load = " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "unknown"
    w(
        f"- load average when summarised: {load} (on a shared machine other work shares the "
        "CPUs; the shares below are of this process's own samples)"
    )
    w(
        "- callchains are frame-pointer ones: whole in the kernel (so *in syscalls* is exact: "
        "the samples with a syscall entry on their stack), cut short in user code; user time "
        "is attributed to the sampled frame (self time).\n"
    )
    results = [(f, summarise(f, args.top)) for f in files]
    w("## Summary\n")
    w("| process | samples | CPU time | events passed | CPU µs per event | kernel | user | in syscalls |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for f, (meta, n, total, kernel, user, in_sys, *_rest) in results:
        events = meta.get("events", 0)
        per = f"{total / 1000 / events:.1f}" if events else "–"
        w(
            f"| {meta.get('comparator', f.stem)} | {n:,} | {total / 1e9:.2f} s | {events:,} | "
            f"{per} | {pct(kernel, total)} | {pct(user, total)} | {pct(in_sys, total)} |"
        )
    w("")
    for f, (meta, n, total, kernel, user, in_sys, by_sys, by_crate, by_symbol, kother) in results:
        name = meta.get("comparator", f.stem)
        events = meta.get("events", 0)
        w(f"## {name}\n")
        w(
            f"{n:,} samples, {total / 1e9:.2f} s of CPU over {meta.get('seconds', 0):.1f} s of "
            f"schedule, {events:,} content events: kernel {pct(kernel, total)}, user "
            f"{pct(user, total)}; inside syscalls {pct(in_sys, total)}.\n"
        )
        w("### Syscalls (share of all samples; µs per event)\n")
        w("| syscall | share | CPU µs per event |")
        w("| --- | ---: | ---: |")
        for sys_name, p in by_sys.most_common(15):
            per = f"{p / 1000 / events:.2f}" if events else "–"
            w(f"| {sys_name} | {pct(p, total)} | {per} |")
        for what, p in kother.most_common():
            per = f"{p / 1000 / events:.2f}" if events else "–"
            w(f"| kernel outside syscalls: {what} | {pct(p, total)} | {per} |")
        w("")
        w("### User time by crate (self time; the gateway's own crate by module)\n")
        w("| crate | share |")
        w("| --- | ---: |")
        for crate, p in by_crate.most_common(20):
            w(f"| {crate} | {pct(p, total)} |")
        w("")
        w(f"### Top {args.top} symbols by self time\n")
        w("| | symbol | share |")
        w("| --- | --- | ---: |")
        for (space, sym), p in by_symbol.most_common(args.top):
            sym = sym.replace("|", "\\|")
            if len(sym) > 140:
                sym = sym[:137] + "..."
            w(f"| {space} | `{sym}` | {pct(p, total)} |")
        w("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
