#!/usr/bin/env python3
"""Turns the JSON reports of bench/run_benchmarks.sh into the Markdown of docs/benchmarks.md:
the four ratios of issue 3's "Benchmarks" section, each from numbers measured in one run."""
import argparse
import json
import os
import sys


def load(results, name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)["runs"]


def ms(us):
    return f"{us / 1000:.2f}"


def point_at(run, concurrency):
    for p in run["points"]:
        if p["concurrency"] == concurrency:
            return p
    return None


def threads(q):
    # In-process points name their intra-op thread count (the sweep of bench --in-process);
    # reports written before the sweep do not.
    n = q.get("intra_op_threads")
    return f"{n} thread{'s' if n != 1 else ''}" if n else "threads not recorded"


def errors(p):
    return sum(p["errors_by_kind"].values()) if p else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default="bench/results")
    ap.add_argument("--build-type", default="unknown")
    args = ap.parse_args()
    out = []
    w = out.append
    meta = None
    for name in ("efficiency.json", "overhead.json", "peer.json", "batching.json"):
        runs = load(args.results, name)
        if runs:
            meta = runs[0]
            break
    if meta:
        w(f"Measured {meta['started_at']} with fastpath {meta['fastpath_version']} "
          f"({args.build_type} build), ONNX Runtime CPU execution provider, seed {meta['seed']}.\n")

    w("### 1. Server efficiency (cnn_classifier, concurrency 32, the example config)\n")
    w("`efficiency` is what `fastpath bench` reports: server inferences/s over the best in-process "
      "inferences/s (completed runs / wall time) at any batch size and any intra-op thread count up "
      "to the usable cores, both measured in the same `fastpath bench` run. `one core's CPU-time "
      "rate` is the best in-process rate of one ORT thread computed from the runs' own thread CPU "
      "time, which the machine's load does not change: what one core computes when nothing else "
      "runs on it.\n")
    w("| transport | server infer/s | server p99 ms | avg batch formed | best in-process infer/s (batch, intra-op threads) | efficiency | one core's CPU-time rate infer/s (batch) | target |")
    w("|---|---|---|---|---|---|---|---|")
    for run in load(args.results, "efficiency.json"):
        p = point_at(run, 32)
        best = max(run["in_process"], key=lambda q: q["throughput_ips"]) if run["in_process"] else None
        if not p or not best:
            continue
        ceils = [q for q in run["in_process"] if q.get("cpu_ceiling_ips")]
        if ceils:
            ceil = max(ceils, key=lambda q: q["cpu_ceiling_ips"])
            ceil_text = f"{ceil['cpu_ceiling_ips']:.0f} ({ceil['batch_size']})"
        else:
            ceil_text = "-"
        batch = p["server"]["average_batch"] if p.get("server") else float("nan")
        w(f"| {run['transport']} {run['encoding']} | {p['throughput_ips']:.0f} | {ms(p['latency_us']['p99'])} | "
          f"{batch:.1f} | {best['throughput_ips']:.0f} ({best['batch_size']}, {threads(best)}) | **{run['efficiency']:.2f}** | "
          f"{ceil_text} | >= 0.90 |")
    w("")

    w("### 2. Protocol overhead (mlp_classifier, concurrency 1, the example config)\n")
    w("| transport | server p50 us | in-process p50 us (batch 1) | overhead us | target |")
    w("|---|---|---|---|---|")
    for run in load(args.results, "overhead.json"):
        p = point_at(run, 1)
        ip = next((q for q in run["in_process"] if q["batch_size"] == 1), None)
        if not p or not ip:
            continue
        over = p["latency_us"]["p50"] - ip["latency_us"]["p50"]
        w(f"| {run['transport']} {run['encoding']} | {p['latency_us']['p50']:.0f} | {ip['latency_us']['p50']:.0f} | "
          f"**{over:.0f}** | <= 50 |")
    w("")

    w("### 3. Batching gain (concurrency 32, HTTP binary, max_batch_size 32)\n")
    w("| model | without dynamic batching infer/s (p99 ms) | with dynamic batching infer/s (p99 ms, window, avg batch) | gain |")
    w("|---|---|---|---|")
    for run in load(args.results, "batching.json"):
        cal = run.get("calibration")
        if not cal:
            continue
        base = next((c for c in cal["candidates"] if not c["dynamic_batching"] and c["ran"]), None)
        dyn = [c for c in cal["candidates"] if c["dynamic_batching"] and c["ran"] and c["point"]["errors"] == 0]
        if not base or not dyn:
            continue
        best = max(dyn, key=lambda c: c["point"]["throughput_ips"])
        bp, dp = base["point"], best["point"]
        gain = dp["throughput_ips"] / bp["throughput_ips"] if bp["throughput_ips"] else float("nan")
        avg = dp["server"]["average_batch"] if dp.get("server") else float("nan")
        w(f"| {run['model']} | {bp['throughput_ips']:.0f} ({ms(bp['latency_us']['p99'])}) | "
          f"{dp['throughput_ips']:.0f} ({ms(dp['latency_us']['p99'])}, {best['max_queue_delay_us']} us, {avg:.1f}) | "
          f"**{gain:.2f}x** |")
    w("")

    w("### 4. Peer: Node.js http + onnxruntime-node, unbatched (cnn_classifier, HTTP JSON)\n")
    w("Target (issue 11): at c=16, fastpath with the example config serves >= 2x the peer's "
      "throughput with a lower p99.\n")
    peer_runs = load(args.results, "peer.json")
    peer = next((r for r in peer_runs if "node" in r["label"]), None)
    w("| server | c | infer/s | p99 ms | errors | throughput vs peer | p99 vs peer |")
    w("|---|---|---|---|---|---|---|")
    for run in peer_runs:
        for p in run["points"]:
            q = point_at(peer, p["concurrency"]) if peer else None
            ratio = f"{p['throughput_ips'] / q['throughput_ips']:.2f}x" if q and q["throughput_ips"] else "-"
            p99r = f"{p['latency_us']['p99'] / q['latency_us']['p99']:.2f}x" if q and q["latency_us"]["p99"] else "-"
            w(f"| {run['label']} | {p['concurrency']} | {p['throughput_ips']:.0f} | {ms(p['latency_us']['p99'])} | "
              f"{errors(p)} | {ratio} | {p99r} |")
    w("")

    cmds = os.path.join(args.results, "commands.txt")
    if os.path.exists(cmds):
        w("### Commands\n")
        w("`$HTTP_PORT`/`$GRPC_PORT` are the ports of the `fastpath serve` (or peer) that the script started; "
          "`$WORK/plain` is models/example without its `dynamic_batching` block; everything else "
          "runs on models/example as generated.\n")
        w("Each command is followed by the machine's load average when it started (2 cores, "
          "shared with other builds): the ratios are only as good as that quiet.\n")
        w("```sh")
        with open(cmds) as f:
            for line in f:
                if line.startswith("# part ") or line.startswith("# end part "):
                    continue  # section markers of run_benchmarks.sh
                w(line.rstrip())
        w("```")
    print("\n".join(out))


if __name__ == "__main__":
    sys.exit(main())
