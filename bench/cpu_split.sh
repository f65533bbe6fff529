#!/usr/bin/env bash
# Where a server's cores go (issue 11): one `fastpath serve` on the example models, one
# closed-loop run of `fastpath bench` against it, and the CPU each of the server's threads
# used over the run (from /proc/PID/task/*/stat; fastpath names its threads: fp-http/N,
# fp-grpc/N, fp-run/N for an instance's worker, fp-batch-timer, fp-metrics; ONNX Runtime's
# pool threads carry the name of the thread that created them, `fastpath`), beside the load
# generator's own CPU (/usr/bin/time) and the average batch (the model's statistics). Counts, not
# timings: they say what a request costs each side on this machine, whatever its speed.
# With CLIENT=outside the load comes from wrk or h2load (bench/lib.sh's outside_load, HTTP
# binary), and the requests are counted by the server's statistics.
#
# SERVE_ARGS adds `serve` arguments (e.g. "--http-threads 1"); SERVER_CPUS and CLIENT_CPUS pin
# the server and the load generator (bench/lib.sh); CLIENT_BIN runs the load from another
# fastpath binary than the server's (an A/B of the client).
#
# Usage: [ENCODING=json] [CLIENT=outside] bench/cpu_split.sh [http|grpc] [model] [concurrency] [seconds] [fastpath]
#   e.g. bench/cpu_split.sh http cnn_classifier 32 8  (HTTP bodies: binary unless ENCODING=json)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRANSPORT=${1:-http}
MODEL=${2:-cnn_classifier}
CONCURRENCY=${3:-32}
SECONDS_RUN=${4:-8}
FP=${5:-$ROOT/build/src/cli/fastpath}
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT
# shellcheck disable=SC2086  # SERVE_ARGS: further `serve` arguments, split at spaces
start_server server "$FP" ${SERVE_ARGS:-}
SERVER=${SERVERS[-1]}
URL=127.0.0.1:$(server_port server "$TRANSPORT")
ENCODING_ARGS=()
[ "$TRANSPORT" = http ] && ENCODING_ARGS=(--encoding "${ENCODING:-binary}")
CLIENT_FP=("${CLIENT_BIN:-$FP}")
[ -n "${CLIENT_CPUS:-}" ] && CLIENT_FP=(taskset -c "$CLIENT_CPUS" "${CLIENT_BIN:-$FP}")
bench() {  # measurement-ms [extra args]
  "${CLIENT_FP[@]}" bench -m "$MODEL" -i "$TRANSPORT" -u "$URL" "${ENCODING_ARGS[@]}" \
    --concurrency "$CONCURRENCY" --warmup-ms 0 --measurement-interval-ms "$1" --max-trials 1 --seed 1
}
snapshot() {  # tid name utime stime (clock ticks)
  for task in /proc/$SERVER/task/*; do
    echo "${task##*/} $(tr ' ' _ < "$task/comm") $(cut -d' ' -f14,15 < "$task/stat")"
  done
}
STATS_URL=http://127.0.0.1:$(server_port server http)
if [ "${CLIENT:-fastpath}" = outside ]; then
  outside_requests server "$MODEL"
  read -r ok0 _ < <(model_counts "$STATS_URL" "$MODEL")
  read -r inferences0 executions0 < <(model_executions "$STATS_URL" "$MODEL")
  snapshot > "$WORK/before"
  result=$(outside_load server "$MODEL" "$TRANSPORT" "$CONCURRENCY" "$SECONDS_RUN")
  read -r rate client_us _ <<< "$result"
  snapshot > "$WORK/after"
  read -r ok1 _ < <(model_counts "$STATS_URL" "$MODEL")
  # Per request: the threads' CPU over the server's count of the requests (warm-up included);
  # as cores: at the client's measured rate, over the time those requests take at that rate.
  python3 -c 'import json, sys; rate = float(sys.argv[2])
json.dump({"runs": [{"points": [{"throughput_ips": rate, "throughput_rps": rate}]}], "client_us": float(sys.argv[3])}, open(sys.argv[1], "w"))' \
    "$WORK/run.json" "$rate" "$client_us"
  SECONDS_RUN=$(python3 -c 'import sys; print(int(sys.argv[1]) / float(sys.argv[2]))' "$((ok1 - ok0))" "$rate")
else
  bench 1000 > /dev/null 2>&1  # warm-up
  read -r inferences0 executions0 < <(model_executions "$STATS_URL" "$MODEL")
  snapshot > "$WORK/before"
  /usr/bin/time -f "%U %S" -o "$WORK/client" \
    "${CLIENT_FP[@]}" bench -m "$MODEL" -i "$TRANSPORT" -u "$URL" "${ENCODING_ARGS[@]}" \
    --concurrency "$CONCURRENCY" --warmup-ms 0 --measurement-interval-ms "$((SECONDS_RUN * 1000))" --max-trials 1 --seed 1 \
    --json "$WORK/run.json" > /dev/null 2>&1
  snapshot > "$WORK/after"
fi
read -r inferences1 executions1 < <(model_executions "$STATS_URL" "$MODEL")
echo "$((inferences1 - inferences0)) $((executions1 - executions0))" > "$WORK/executions"
python3 - "$WORK" "$SECONDS_RUN" "$(getconf CLK_TCK)" << 'PY'
import json, sys
work, seconds, tick = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def load(name):
    out = {}
    for line in open(f"{work}/{name}"):
        tid, comm, user, system = line.split()
        out[tid] = (comm, int(user), int(system))
    return out
before, after = load("before"), load("after")
run = json.load(open(f"{work}/run.json"))
point = run["runs"][0]["points"][-1]
rate = point["throughput_ips"]
reqs = point["throughput_rps"]
print(f"{point['throughput_rps']:.0f} requests/s, {rate:.0f} infer/s over {seconds:.0f} s")
inferences, executions = (int(x) for x in open(f"{work}/executions").read().split())
print(f"average batch {inferences / max(executions, 1):.1f} ({inferences} inferences in {executions} runs)")
print(f"{'thread':<18}{'cores':>7}{'user':>7}{'sys':>7}{'us CPU/request':>16}")
total = 0.0
for tid, (comm, user, system) in sorted(after.items()):
    u0, s0 = before.get(tid, (comm, 0, 0))[1:]
    u, s = (user - u0) / tick / seconds, (system - s0) / tick / seconds
    total += u + s
    if u + s >= 0.005:
        print(f"{comm:<18}{u + s:7.3f}{u:7.3f}{s:7.3f}{(u + s) / reqs * 1e6:16.1f}")
print(f"{'server, all':<18}{total:7.3f}{'':14}{total / reqs * 1e6:16.1f}")
if "client_us" in run:  # an outside client: its own count, over its measured run
    print(f"{'load generator':<18}{run['client_us'] * reqs / 1e6:7.3f}{'':14}{run['client_us']:16.1f}")
else:
    cu, cs = (float(x) for x in open(f"{work}/client").read().split()[-2:])
    client = (cu + cs) / seconds
    print(f"{'load generator':<18}{client:7.3f}{cu / seconds:7.3f}{cs / seconds:7.3f}{client / reqs * 1e6:16.1f}")
PY
