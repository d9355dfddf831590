#!/usr/bin/env python3
"""Summarises a Kineto trace of decoding (speclab run/bench-overhead --trace).

Prints, for the span from the first to the last device activity:
  - device busy time, split into CUDA-graph work and everything else, and
    the idle time with a histogram of the idle gaps;
  - the host operators and CUDA runtime calls that overlap the idle gaps
    (what the device waited for), by total overlap;
  - the non-graph device kernels by total time, and the kernels inside graphs;
  - the host's synchronising calls.
Usage: scripts/trace_summary.py TRACE.json [TRACE.json ...] [--steps N ...] [--top K]
"""
import argparse
import bisect
import collections
import json

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
SYNC_CALLS = ("Synchronize", "cudaMemcpy", "cuMemcpy")


def merged(intervals):
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def overlap_by_name(events, gaps):
    """Sum, per event name, the time each event overlaps the gaps."""
    starts = [g[0] for g in gaps]
    totals = collections.Counter()
    for e in events:
        s, t = e["ts"], e["ts"] + e["dur"]
        i = max(0, bisect.bisect_right(starts, s) - 1)
        while i < len(gaps) and gaps[i][0] < t:
            o = min(t, gaps[i][1]) - max(s, gaps[i][0])
            if o > 0:
                totals[e["name"]] += o
            i += 1
    return totals


def top_level(ops):
    """Host operators not nested in another operator of the same thread."""
    out = []
    by_tid = collections.defaultdict(list)
    for e in ops:
        by_tid[e["tid"]].append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = -1.0
        for e in evs:
            if e["ts"] >= end:
                out.append(e)
                end = e["ts"] + e["dur"]
    return out


def summarise(path, steps, top):
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    runtime = [e for e in events if e.get("cat") in RUNTIME_CATS]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    print(f"## {path}")
    if not gpu:
        print("no device activity in this trace\n")
        return
    busy = merged((e["ts"], e["ts"] + e["dur"]) for e in gpu)
    first, last = busy[0][0], busy[-1][1]
    busy_us = sum(t - s for s, t in busy)
    gaps = [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1)]
    idle_us = sum(t - s for s, t in gaps)
    graph_ids = {e["args"].get("correlation") for e in runtime if e["name"].startswith("cudaGraphLaunch")}
    in_graph = [e for e in gpu if e.get("args", {}).get("correlation") in graph_ids]
    in_graph_ids = {id(e) for e in in_graph}
    graph_us = sum(t - s for s, t in merged((e["ts"], e["ts"] + e["dur"]) for e in in_graph))
    per = f" ({steps} steps: per step " if steps else ""

    def line(label, us):
        extra = f"{per}{us / steps:.1f} us)" if steps else ""
        print(f"- {label}: {us / 1e3:.3f} ms{extra}")

    line("span, first to last device activity", last - first)
    line("device busy", busy_us)
    line("  in CUDA graphs", graph_us)
    line("  outside graphs", busy_us - graph_us)
    line("device idle", idle_us)
    hist = collections.Counter()
    for s, t in gaps:
        d = t - s
        hist["<5 us" if d < 5 else "5-20 us" if d < 20 else "20-100 us" if d < 100 else ">=100 us"] += d
    counts = collections.Counter(
        "<5 us" if t - s < 5 else "5-20 us" if t - s < 20 else "20-100 us" if t - s < 100 else ">=100 us" for s, t in gaps)
    print("- idle gaps: " + ", ".join(f"{k}: {counts[k]} gaps, {hist[k] / 1e3:.3f} ms"
                                       for k in ("<5 us", "5-20 us", "20-100 us", ">=100 us") if counts[k]))
    print(f"- graph launches: {len(graph_ids)}; device activities outside graphs: {len(gpu) - len(in_graph)}")

    print(f"\nHost work overlapping device idle time (top-level operators, top {top}):\n")
    print("| operator | overlap ms | calls |")
    print("|---|---:|---:|")
    tops = top_level(ops)
    calls = collections.Counter(e["name"] for e in tops)
    for name, us in overlap_by_name(tops, gaps).most_common(top):
        print(f"| {name} | {us / 1e3:.3f} | {calls[name]} |")
    print(f"\nCUDA runtime calls overlapping device idle time (top {top}):\n")
    print("| call | overlap ms | calls | mean us |")
    print("|---|---:|---:|---:|")
    rcalls = collections.Counter(e["name"] for e in runtime)
    rtime = collections.Counter()
    for e in runtime:
        rtime[e["name"]] += e["dur"]
    for name, us in overlap_by_name(runtime, gaps).most_common(top):
        print(f"| {name} | {us / 1e3:.3f} | {rcalls[name]} | {rtime[name] / rcalls[name]:.1f} |")
    print(f"\nDevice work outside graphs (top {top}):\n")
    print("| kernel | total ms | count | mean us |")
    print("|---|---:|---:|---:|")
    ktime, kcount = collections.Counter(), collections.Counter()
    for e in gpu:
        if id(e) not in in_graph_ids:
            ktime[e["name"][:90]] += e["dur"]
            kcount[e["name"][:90]] += 1
    for name, us in ktime.most_common(top):
        print(f"| {name} | {us / 1e3:.3f} | {kcount[name]} | {us / kcount[name]:.1f} |")
    print(f"\nDevice work inside graphs (top {top}):\n")
    print("| kernel | total ms | count | mean us |")
    print("|---|---:|---:|---:|")
    gtime, gcount = collections.Counter(), collections.Counter()
    for e in in_graph:
        gtime[e["name"][:90]] += e["dur"]
        gcount[e["name"][:90]] += 1
    for name, us in gtime.most_common(top):
        print(f"| {name} | {us / 1e3:.3f} | {gcount[name]} | {us / gcount[name]:.1f} |")
    syncs = [e for e in runtime if any(k in e["name"] for k in SYNC_CALLS)]
    sync_names = collections.Counter(e["name"] for e in syncs)
    print("\nSynchronising calls: " + ", ".join(f"{n} x{c}" for n, c in sync_names.most_common()) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--steps", type=int, nargs="*", default=[], help="steps of each trace, for per-step figures")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    for i, path in enumerate(args.traces):
        summarise(path, args.steps[i] if i < len(args.steps) else 0, args.top)


if __name__ == "__main__":
    main()
