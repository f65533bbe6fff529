#!/usr/bin/env bash
# fastpath-cpu-efficiency: issue 11's efficiency target measured as it is meant, with the load
# generator on cores of its own. The server and the in-process ceiling run on one set of CPUs,
# `fastpath bench` (the client) on another, so the client takes none of the cores the server is
# compared on. On a 2-core machine the client shares the server's cores whatever it is, which
# bounds the efficiency below the target (docs/benchmarks.md section 11); a GPU node's CPUs
# (16 on the machine the GPU check runs on) give the split the target assumes.
#
# Runs from the unpacked bundle (tools/bundle.sh installs it as share/fastpath/
# cpu-efficiency.sh next to gpu-check.sh) or from a source tree with a dev build, and needs
# what gpu-check.sh needs for its models: python3 with onnx and numpy. No GPU.
#
# Per round, back to back: the server over HTTP binary at concurrency 32, the model in-process
# (batch 16 and 32, at the model's own thread setting and at 1, 2, 4, ... and all of the
# server's CPUs: the best), then the server over gRPC. The server is `fastpath serve` with the
# example cnn_classifier's generated config, untouched: its threads are what the server chose
# for the CPUs it may use. While each transport is loaded, the CPU of each of the server's
# threads is read from /proc (fastpath names them: fp-http/N, fp-grpc/N, fp-run/N; ONNX
# Runtime's pool threads are `fastpath`), so that the report says where the server's CPUs went:
# a front-end thread near 1.00 core while the server's CPUs are not all busy means that
# transport's threads, not the model, bound the throughput (`serve --http-threads` /
# `--grpc-threads`).
#
# Usage: share/fastpath/cpu-efficiency.sh [REPORT_DIR]   (report.md; $OUT takes precedence)
# Environment:
#   SERVER_CPUS, CLIENT_CPUS   taskset CPU lists (default: the first half of the CPUs this
#                              process may use for the server, the rest for the client)
#   ROUNDS                     rounds (default 3)
#   MEASURE_MS                 each measurement's window (default 3000)
#   SERVE_ARGS                 further `serve` arguments, e.g. "--grpc-threads 4" (default none)
#   FASTPATH                   the fastpath binary (default: the bundle's, else build/'s)
#   FASTPATH_GPU_CHECK_PYTHON  python3 with onnx and numpy (default python3)
# Exit status: 0 when it measured (the verdict is in the report: it is a benchmark, not a
# test), 1 when it could not.
set -euo pipefail

script_dir="$(cd "$(dirname "$0")" && pwd)"
if [[ -n "${FASTPATH:-}" ]]; then
  fastpath="$FASTPATH"
elif [[ -x "$script_dir/../../bin/fastpath" ]]; then
  fastpath="$script_dir/../../bin/fastpath"
else
  fastpath="$script_dir/../build/src/cli/fastpath"
fi
generator="$script_dir/generate_models.py"
py="${FASTPATH_GPU_CHECK_PYTHON:-python3}"
rounds="${ROUNDS:-3}"
measure_ms="${MEASURE_MS:-3000}"
model=cnn_classifier
report_dir="${OUT:-${1:-./cpu-efficiency-report}}"
fail() {
  echo "cpu-efficiency: $*" >&2
  exit 1
}
[[ -x "$fastpath" ]] || fail "no fastpath binary at $fastpath (set FASTPATH)"
[[ -f "$generator" ]] || fail "no generate_models.py next to this script"
command -v taskset > /dev/null || fail "taskset (util-linux) is missing"

if [[ -z "${SERVER_CPUS:-}" || -z "${CLIENT_CPUS:-}" ]]; then
  read -r SERVER_CPUS CLIENT_CPUS < <("$py" -c 'import os
cpus = sorted(os.sched_getaffinity(0))
half = len(cpus) // 2
print(",".join(map(str, cpus[:half])) or "-", ",".join(map(str, cpus[half:])))')
  [[ "$SERVER_CPUS" != - ]] || fail "one CPU only: nothing to split between server and client"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/fastpath-cpu-efficiency.XXXXXX")"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2> /dev/null && wait "$server_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
"$py" "$generator" --out "$work/models" --only "$model" > /dev/null || fail "generate_models.py failed"

read -ra serve_args <<< "${SERVE_ARGS:-}"
taskset -c "$SERVER_CPUS" "$fastpath" serve --model-repository "$work/models" --host 127.0.0.1 \
  --http-port 0 --grpc-port 0 --metrics-port 0 --port-file "$work/ports" "${serve_args[@]}" \
  > "$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do
  [[ -s "$work/ports" ]] && break
  kill -0 "$server_pid" 2> /dev/null || { cat "$work/serve.log" >&2; fail "fastpath serve exited"; }
  sleep 0.1
done
[[ -s "$work/ports" ]] || fail "fastpath serve did not start within 60 s"
port() { grep -o "$1=[0-9]*" "$work/ports" | cut -d= -f2; }

best() {  # JSON from bench: the server point's throughput, or the best in-process one
  "$py" -c 'import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(max(p["throughput_ips"] for p in run["in_process"]) if run.get("in_process")
      else run["points"][-1]["throughput_ips"])' "$1"
}
# cores TRANSPORT START FROM TO: the CPU of each of the server's threads between FROM and TO
# seconds after START (epoch seconds), as one line of the cores table.
cores() {
  "$py" - "$server_pid" "$@" << 'PY'
import collections, glob, os, sys, time
pid, transport = sys.argv[1], sys.argv[2]
start, since, until = map(float, sys.argv[3:])
def sample():  # CPU seconds per thread name (threads of one name add up), and the clock
    cpu = collections.Counter()
    for stat in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            text = open(stat).read()
        except OSError:
            continue  # the thread ended
        fields = text[text.rindex(")") + 2:].split()
        cpu[text[text.index("(") + 1:text.rindex(")")]] += int(fields[11]) + int(fields[12])
    return cpu, time.monotonic()
time.sleep(max(0.0, start + since - time.time()))
before, t0 = sample()
time.sleep(max(0.0, start + until - time.time()))
after, t1 = sample()
tick = os.sysconf("SC_CLK_TCK")
cores = {name: (after[name] - before[name]) / tick / (t1 - t0) for name in after}
front = {n: c for n, c in cores.items() if n.startswith(("fp-http/", "fp-grpc/"))}
busiest = max(front, key=front.get) if front else "-"
print(transport, busiest, f"{front.get(busiest, 0):.2f}", f"{sum(front.values()):.2f}",
      f"{sum(c for n, c in cores.items() if n.startswith('fp-run/')):.2f}",
      f"{sum(c for n, c in cores.items() if n == 'fastpath'):.2f}", f"{sum(cores.values()):.2f}")
PY
}
served() {  # transport
  local start
  start="$(date +%s.%N)"
  # The threads' CPU over the middle of the measurement: from just after the client's
  # warm-up (1 s) to 80% of its window, so that neither the client's start nor its end count.
  cores "$1" "$start" 1.3 "$(awk -v ms="$measure_ms" 'BEGIN { print 1 + ms * 0.8 / 1000 }')" \
    >> "$work/cores" &
  local cores_pid=$!
  taskset -c "$CLIENT_CPUS" "$fastpath" bench -m "$model" -i "$1" -u "127.0.0.1:$(port "$1")" \
    --concurrency 32 --warmup-ms 1000 --measurement-interval-ms "$measure_ms" --max-trials 1 --seed 1 \
    --json "$work/$1.json" > "$work/bench.log" 2>&1 || { cat "$work/bench.log" >&2; fail "bench over $1 failed"; }
  wait "$cores_pid" || fail "reading the server's threads failed"
  best "$work/$1.json"
}
# The ceiling's thread counts besides the model's own: powers of two up to the server's CPUs,
# and that count (1, 2, 4, 8 on 8 CPUs), not every count, to keep a round short on a large node.
server_cpu_count="$(taskset -c "$SERVER_CPUS" nproc)"
ceiling_threads="$(
  n=1
  while ((n < server_cpu_count)); do
    printf '%d,' "$n"
    n=$((n * 2))
  done
  echo "$server_cpu_count"
)"
ceiling() {
  taskset -c "$SERVER_CPUS" "$fastpath" bench -m "$model" --in-process --no-server \
    --model-repository "$work/models" --batch-sizes 16,32 --in-process-threads "$ceiling_threads" \
    --warmup-ms 500 \
    --measurement-interval-ms "$measure_ms" --max-trials 1 --seed 1 --json "$work/in_process.json" \
    > "$work/bench.log" 2>&1 || { cat "$work/bench.log" >&2; fail "the in-process run failed"; }
  best "$work/in_process.json"
}

threads="$(grep -o "model '$model' v1: [^;]*;[^;]*" "$work/serve.log" | head -1)"
: > "$work/rows"
: > "$work/cores"
for _ in $(seq "$rounds"); do
  echo "$(served http) $(ceiling) $(served grpc)" >> "$work/rows"
done
mkdir -p "$report_dir"
"$py" - "$work/rows" "$work/cores" "$SERVER_CPUS" "$CLIENT_CPUS" "$threads" "$(nproc --all)" \
  "$($fastpath --version 2> /dev/null | head -1)" "$server_cpu_count" "${SERVE_ARGS:-}" \
  > "$report_dir/report.md" << 'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
cores = [line.split() for line in open(sys.argv[2])]
server, client, threads, cpus, version, server_cpus, serve_args = sys.argv[3:]
print(f"# CPU efficiency at c=32, client on its own cores ({version})\n")
print(f"cnn_classifier, example config. Server and in-process ceiling on CPUs {server}; "
      f"`fastpath bench` on CPUs {client} (of {cpus}). The server chose: {threads}."
      + (f" `serve` arguments: {serve_args}." if serve_args else "") + "\n")
print("| round | HTTP infer/s | in-process best infer/s | gRPC infer/s | HTTP efficiency | gRPC efficiency |")
print("|---|---|---|---|---|---|")
for i, (h, c, g) in enumerate(rows, 1):
    print(f"| {i} | {h:.0f} | {c:.0f} | {g:.0f} | {h / c:.3f} | {g / c:.3f} |")
eh = statistics.median(h / c for h, c, _ in rows)
eg = statistics.median(g / c for _, c, g in rows)
print(f"\nMedian efficiency: HTTP {eh:.3f}, gRPC {eg:.3f} (target 0.90: "
      f"HTTP {'met' if eh >= 0.9 else 'not met'}, gRPC {'met' if eg >= 0.9 else 'not met'}).")
print(f"\nWhere the server's {server_cpus} CPUs went while each transport was loaded, in cores "
      "(CPU seconds per second, from /proc, from the end of the client's warm-up to 80% of its measurement):\n")
print("| round | transport | busiest front-end thread | its cores | all front-end threads | "
      "model workers (fp-run/*) | ONNX Runtime pool (fastpath) | server, all threads |")
print("|---|---|---|---|---|---|---|---|")
for i, row in enumerate(cores):
    print(f"| {i // 2 + 1} | " + " | ".join(row) + " |")
PY
cat "$report_dir/report.md"
