#!/usr/bin/env bash
# Issue 11 §1, one ONNX Runtime intra-op pool or one per session: the example models served
# with their unmodified configs (no thread count) under `serve --ort-thread-pool
# per-session` (each CPU instance gets the usable cores as a pool of its own) and `global`
# (one process-wide pool of the usable cores, shared by every session), A/B/A/B in one run
# so that the machine's load affects both alike. Two scenarios per round:
#   1. cnn_classifier alone, HTTP binary, concurrency 32;
#   2. cnn_classifier and transformer_encoder busy at once in one server, each driven by
#      its own `fastpath bench --concurrency 16`, both started at the same moment.
# Every bench runs a fixed 1 s warm-up and three 2 s windows (-s 0: never "stable" early),
# so the two loads of scenario 2 overlap for the whole measurement. /proc/loadavg (and any
# compiler running) is printed before each measurement. Ends with the table: each model's throughput and p99 per
# variant, and global/per-session, per round and overall (the mean over the rounds).
# Usage: bench/thread_pool_ab.sh [build-dir] [rounds]   (defaults: build 3)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/${1:-build}"
ROUNDS=${2:-3}
MODELS="$BUILD/tests/integration/example_models"
WORK=$(mktemp -d)
# A copy, so that a rebuild during the run changes neither variant.
FP="$WORK/fastpath"
cp "$BUILD/src/cli/fastpath" "$FP"
SERVER=""
cleanup() {
  if [ -n "$SERVER" ]; then kill -TERM "$SERVER" 2> /dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/alone" "$WORK/both" "$WORK/out"
cp -r "$MODELS/cnn_classifier" "$WORK/alone/"
cp -r "$MODELS/cnn_classifier" "$MODELS/transformer_encoder" "$WORK/both/"

# start_server REPOSITORY POOL: serves it on free ports, waits until ready, sets PORT.
start_server() {
  rm -f "$WORK/port"
  "$FP" serve --model-repository "$1" --ort-thread-pool "$2" --http-port 0 --grpc-port 0 \
    --metrics-port 0 --port-file "$WORK/port" --host 127.0.0.1 > "$WORK/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 300); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  PORT=$(grep -o "http=[0-9]*" "$WORK/port" | cut -d= -f2)
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$PORT/v2/health/ready" > /dev/null && break
    sleep 0.1
  done
  grep -ho "model '[a-z_]*' v1: [^;]*" "$WORK/serve.log" | sed 's/^/  serve: /' || true
}

stop_server() {
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  SERVER=""
}

# bench MODEL CONCURRENCY JSON
# The load average, and how many compilers run beside us (a measurement taken with one is
# not one).
machine() {
  echo "loadavg $(cut -d' ' -f1-3 /proc/loadavg), compilers running: $(pgrep -c cc1plus || true)"
}

bench() {
  "$FP" bench -m "$1" -u "127.0.0.1:$PORT" --encoding binary --concurrency "$2" \
    --warmup-ms 1000 --measurement-interval-ms 2000 --max-trials 3 -s 0 --seed 1 -q \
    --json "$3" > /dev/null
}

for round in $(seq "$ROUNDS"); do
  for pool in per-session global; do
    echo "round $round, scenario 1 (cnn alone), $pool: $(machine)"
    start_server "$WORK/alone" "$pool"
    bench cnn_classifier 32 "$WORK/out/1-$pool-$round-cnn_classifier.json"
    stop_server
  done
  for pool in per-session global; do
    echo "round $round, scenario 2 (cnn + transformer), $pool: $(machine)"
    start_server "$WORK/both" "$pool"
    bench cnn_classifier 16 "$WORK/out/2-$pool-$round-cnn_classifier.json" &
    cnn=$!
    bench transformer_encoder 16 "$WORK/out/2-$pool-$round-transformer_encoder.json" &
    transformer=$!
    wait "$cnn"
    wait "$transformer"
    stop_server
  done
done

python3 - "$WORK/out" "$ROUNDS" << 'EOF'
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def point(scenario, pool, rnd, model):
    with open(os.path.join(out, f"{scenario}-{pool}-{rnd}-{model}.json")) as f:
        p = json.load(f)["runs"][-1]["points"][0]
    if p["errors"]:
        print(f"!! {scenario}-{pool}-{rnd}-{model}: {p['errors']} errors", file=sys.stderr)
    return p["throughput_rps"], p["latency_us"]["p99"] / 1000.0

print()
print("| scenario | model | round | per-session req/s | p99 ms | global req/s | p99 ms "
      "| global/per-session req/s | p99 |")
print("|---|---|---|---|---|---|---|---|---|")
for scenario, models in ((1, ["cnn_classifier"]), (2, ["cnn_classifier", "transformer_encoder"])):
    for model in models:
        sums = {"per-session": [0.0, 0.0], "global": [0.0, 0.0]}
        for rnd in list(range(1, rounds + 1)) + ["mean"]:
            if rnd == "mean":
                a, b = [[v / rounds for v in sums[k]] for k in ("per-session", "global")]
            else:
                a = point(scenario, "per-session", rnd, model)
                b = point(scenario, "global", rnd, model)
                for k, v in (("per-session", a), ("global", b)):
                    sums[k][0] += v[0]
                    sums[k][1] += v[1]
            print(f"| {scenario} | {model} | {rnd} | {a[0]:.1f} | {a[1]:.2f} | {b[0]:.1f} "
                  f"| {b[1]:.2f} | {b[0] / a[0]:.3f} | {b[1] / a[1]:.3f} |")
EOF
