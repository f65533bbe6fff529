#!/usr/bin/env bash
# The four measurements of issue 3's "Benchmarks" section, on this machine's CPU, driven by
# `fastpath bench`, on the example models with their configs as generated (what a new user
# runs: dynamic batching with a window of 0, threads chosen by the server). Every figure is a ratio taken within one run (one `fastpath bench`
# invocation, or back-to-back runs on the same idle machine), since shared machines are
# noisy. Writes JSON, CSV and SVG into bench/results/ and a summary (bench/results/summary.md)
# with the exact commands.
#
#   bench/run_benchmarks.sh                 # build Release (build-release/) if needed, then run
#   FASTPATH_BUILD_DIR=build bench/run_benchmarks.sh   # use an existing build instead
#
# Knobs: FASTPATH_BUILD_DIR (default build-release; configured with --preset release when
# missing), FASTPATH_JOBS (build parallelism, default 2), FASTPATH_BENCH_WINDOW_MS (window
# length, default 2000), FASTPATH_BENCH_MAX_TRIALS (default 6), FASTPATH_BENCH_RESULTS
# (default bench/results), FASTPATH_BENCH_SKIP_PEER=1 (no Node.js peer),
# FASTPATH_BENCH_QUEUE_DELAY_US (the window the batching calibration tries besides 0,
# default 1000),
# FASTPATH_BENCH_PARTS (which measurements, default "1 2 3 4"; the results of the others are
# kept).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${FASTPATH_BUILD_DIR:-build-release}"
RESULTS="${FASTPATH_BENCH_RESULTS:-bench/results}"
WINDOW_MS="${FASTPATH_BENCH_WINDOW_MS:-2000}"
MAX_TRIALS="${FASTPATH_BENCH_MAX_TRIALS:-6}"
DELAY_US="${FASTPATH_BENCH_QUEUE_DELAY_US:-1000}"
MODELS_DIR="models/example"
EXAMPLE_MODELS=(mlp_classifier cnn_classifier transformer_encoder)
PARTS=" ${FASTPATH_BENCH_PARTS:-1 2 3 4} "
part() { [[ "$PARTS" == *" $1 "* ]]; }
mkdir -p "$RESULTS"
WORK="$(mktemp -d /tmp/fastpath-bench-XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

log() { printf '\n== %s\n' "$*" >&2; }

# ---- Build and models ----
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  if [[ "$BUILD" == "build-release" ]]; then
    cmake --preset release
  else
    echo "run_benchmarks: $BUILD is not a configured build directory" >&2
    exit 2
  fi
fi
cmake --build "$BUILD" --target fastpath -j"${FASTPATH_JOBS:-2}"
FASTPATH="$ROOT/$BUILD/src/cli/fastpath"
[[ -x "$FASTPATH" ]] || FASTPATH="$BUILD/src/cli/fastpath"
BUILD_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt")"
/usr/bin/python3 tools/generate_models.py --out "$MODELS_DIR" --only "${EXAMPLE_MODELS[@]}"

# The example models without dynamic batching (the block removed), for the peer comparison's
# "no batching" line; everything else runs on the example configs as they are.
PLAIN="$WORK/plain"
write_config() {  # SOURCE DEST
  /usr/bin/python3 - "$@" <<'PY'
import re, sys
src, dst = sys.argv[1:]
text = open(src).read()
# Drop any dynamic_batching { ... } block (braces balanced).
m = re.search(r"^dynamic_batching\s*\{", text, re.M)
if m:
    depth, i = 0, m.end() - 1
    while i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            break
    text = text[:m.start()] + text[i:].lstrip("\n")
open(dst, "w").write(text)
PY
}
for m in "${EXAMPLE_MODELS[@]}"; do
  mkdir -p "$PLAIN/$m/1"
  ln -s "$ROOT/$MODELS_DIR/$m/1/model.onnx" "$PLAIN/$m/1/model.onnx"
  write_config "$MODELS_DIR/$m/config.pbtxt" "$PLAIN/$m/config.pbtxt"
done

# Starts `fastpath serve` on a repository; sets HTTP_PORT, GRPC_PORT, SERVER_PID.
start_server() {
  local repo="$1" name="$2"
  rm -f "$WORK/$name.ports"
  "$FASTPATH" serve --model-repository "$repo" --http-port 0 --grpc-port 0 --metrics-port 0 \
    --host 127.0.0.1 --port-file "$WORK/$name.ports" >"$WORK/$name.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 600); do
    if [[ -s "$WORK/$name.ports" ]]; then
      HTTP_PORT="$(sed -n 's/.*http=\([0-9]*\).*/\1/p' "$WORK/$name.ports")"
      GRPC_PORT="$(sed -n 's/.*grpc=\([0-9]*\).*/\1/p' "$WORK/$name.ports")"
      if curl -sf "http://127.0.0.1:$HTTP_PORT/v2/health/ready" >/dev/null 2>&1; then return 0; fi
    fi
    sleep 0.1
  done
  echo "run_benchmarks: fastpath serve ($name) did not become ready; log:" >&2
  tail -20 "$WORK/$name.log" >&2
  exit 1
}
stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}

COMMON=(--warmup-ms 1000 --measurement-interval-ms "$WINDOW_MS" --max-trials "$MAX_TRIALS" --seed 1)
COMMANDS="$RESULTS/commands.txt"
touch "$COMMANDS"
bench() {
  # Records the command (with the ports as placeholders) and runs it.
  local shown="fastpath bench" a
  for a in "$@"; do
    if [[ "$a" =~ ^[-A-Za-z0-9_./:,=\$]+$ ]]; then shown+=" $a"; else shown+=" '$a'"; fi
  done
  shown="${shown//127.0.0.1:$HTTP_PORT/127.0.0.1:\$HTTP_PORT}"
  shown="${shown//127.0.0.1:$GRPC_PORT/127.0.0.1:\$GRPC_PORT}"
  shown="${shown//$WORK\//\$WORK\/}"
  shown="${shown//$ROOT\//}"
  echo "$shown" >>"$COMMANDS"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$COMMANDS"
  "$FASTPATH" bench "$@"
}

# Each part rewrites its own files only.
part 1 && rm -f "$RESULTS"/efficiency.*
part 2 && rm -f "$RESULTS"/overhead.*
part 3 && rm -f "$RESULTS"/batching.* "$RESULTS"/calibration.*
part 4 && rm -f "$RESULTS"/peer.*
# commands.txt: keep the lines of the parts not rerun.
for p in 1 2 3 4; do
  part "$p" && sed -i "/^# part $p\$/,/^# end part $p\$/d" "$COMMANDS"
done

# ---- 1, 2 and 4 (fastpath, default config): one server on the example repository ----
if part 1 || part 2 || part 4; then start_server "$MODELS_DIR" default; fi

# 1. Server efficiency: cnn at c=32 / the best in-process throughput (any batch, any thread
# count up to the usable cores).
if part 1; then
echo "# part 1" >>"$COMMANDS"
log "1. server efficiency (cnn_classifier, c=32, HTTP binary and gRPC, vs in-process ORT)"
bench -m cnn_classifier -u "127.0.0.1:$HTTP_PORT" --encoding binary --concurrency 32 \
  --in-process --model-repository "$MODELS_DIR" --batch-sizes 1,2,4,8,16,32 "${COMMON[@]}" \
  --label "cnn http binary, default config" --json "$RESULTS/efficiency.json" --csv "$RESULTS/efficiency.csv"
bench -m cnn_classifier -i grpc -u "127.0.0.1:$GRPC_PORT" --concurrency 32 \
  --in-process --model-repository "$MODELS_DIR" --batch-sizes 1,2,4,8,16,32 "${COMMON[@]}" \
  --label "cnn grpc, default config" --json "$RESULTS/efficiency.json" --csv "$RESULTS/efficiency.csv" --append \
  --svg "$RESULTS/efficiency.svg"
echo "# end part 1" >>"$COMMANDS"
fi

# 2. Protocol overhead: mlp p50 at c=1 minus in-process p50 at batch 1.
if part 2; then
echo "# part 2" >>"$COMMANDS"
log "2. protocol overhead (mlp_classifier, c=1)"
bench -m mlp_classifier -u "127.0.0.1:$HTTP_PORT" --encoding binary --concurrency 1 \
  --in-process --model-repository "$MODELS_DIR" --batch-sizes 1 "${COMMON[@]}" \
  --label "mlp http binary" --json "$RESULTS/overhead.json" --csv "$RESULTS/overhead.csv"
bench -m mlp_classifier -i grpc -u "127.0.0.1:$GRPC_PORT" --concurrency 1 \
  --in-process --model-repository "$MODELS_DIR" --batch-sizes 1 "${COMMON[@]}" \
  --label "mlp grpc" --json "$RESULTS/overhead.json" --csv "$RESULTS/overhead.csv" --append
echo "# end part 2" >>"$COMMANDS"
fi

# 4 (fastpath side). Peer comparison at c=1,16,32 in JSON, the peer's encoding.
if part 4; then
echo "# part 4" >>"$COMMANDS"
log "4. peer comparison: fastpath, default config (cnn_classifier, HTTP JSON)"
bench -m cnn_classifier -u "127.0.0.1:$HTTP_PORT" --encoding json --concurrency 1,16,32 "${COMMON[@]}" \
  --label "fastpath, default config" --json "$RESULTS/peer.json" --csv "$RESULTS/peer.csv"
echo "# end part 4" >>"$COMMANDS"
fi
if part 1 || part 2 || part 4; then stop_server; fi

if part 4; then
start_server "$PLAIN" plain
echo "# part 4" >>"$COMMANDS"
log "4. peer comparison: fastpath without dynamic batching (HTTP JSON)"
bench -m cnn_classifier -u "127.0.0.1:$HTTP_PORT" --encoding json --concurrency 1,16,32 "${COMMON[@]}" \
  --label "fastpath, no batching" --json "$RESULTS/peer.json" --csv "$RESULTS/peer.csv" --append
echo "# end part 4" >>"$COMMANDS"
stop_server
fi

# ---- 4 (peer side). Node.js http + onnxruntime-node, unbatched ----
if part 4 && ! command -v node >/dev/null; then
  echo "run_benchmarks: no node on PATH: skipping the Node.js peer (tools/setup.sh installs nodejs/npm)" >&2
elif part 4 && [[ -z "${FASTPATH_BENCH_SKIP_PEER:-}" ]]; then
  echo "# part 4" >>"$COMMANDS"
  log "4. peer comparison: Node.js peer"
  PEER_DIR="bench/peer/node"
  if [[ ! -d "$PEER_DIR/node_modules/onnxruntime-node" ]]; then
    # The CPU binaries ship inside the npm package; never fetch CUDA binaries from elsewhere.
    (cd "$PEER_DIR" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund)
  fi
  rm -f "$WORK/peer.ports"
  node "$PEER_DIR/server.js" --model-repository "$PLAIN" --model cnn_classifier --port 0 \
    --port-file "$WORK/peer.ports" >"$WORK/peer.log" 2>&1 &
  PEER_PID=$!
  PIDS+=("$PEER_PID")
  for _ in $(seq 1 300); do [[ -s "$WORK/peer.ports" ]] && break; sleep 0.1; done
  PEER_PORT="$(sed -n 's/.*http=\([0-9]*\).*/\1/p' "$WORK/peer.ports")"
  HTTP_PORT="$PEER_PORT"  # so that the recorded command shows $HTTP_PORT
  bench -m cnn_classifier -u "127.0.0.1:$PEER_PORT" --encoding json --concurrency 1,16,32 "${COMMON[@]}" \
    --label "node http + onnxruntime-node" --json "$RESULTS/peer.json" --csv "$RESULTS/peer.csv" --append
  kill -TERM "$PEER_PID" 2>/dev/null || true
  wait "$PEER_PID" 2>/dev/null || true
  echo "# end part 4" >>"$COMMANDS"
fi
part 4 && "$FASTPATH" bench plot --svg "$RESULTS/peer.svg" --title "cnn_classifier: fastpath vs a hand-written Node.js peer" \
  "$RESULTS/peer.json"

# ---- 3. Batching gain: c=32 with / without dynamic batching, each example model ----
# --calibrate-batching starts fastpath serve per configuration: the baseline (no dynamic
# batching) and max_batch_size 32 with windows of 0 and DELAY_US.
part 3 && echo "# part 3" >>"$COMMANDS"
for m in "${EXAMPLE_MODELS[@]}"; do
  part 3 || break
  log "3. batching gain ($m, c=32, HTTP binary)"
  HTTP_PORT=none GRPC_PORT=none bench -m "$m" --calibrate-batching --slo-p99-ms 1000 --model-repository "$MODELS_DIR" \
    --concurrency 32 --max-batch-sizes 32 --queue-delays-us "0,$DELAY_US" "${COMMON[@]}" \
    --label "$m batching" --json "$RESULTS/batching.json" --csv "$RESULTS/batching.csv" --append
done

# ---- Calibration example: the SLO-driven choice for the cnn ----
if part 3; then
log "calibration example (cnn_classifier, p99 <= 40 ms at c=32)"
HTTP_PORT=none GRPC_PORT=none bench -m cnn_classifier --calibrate-batching --slo-p99-ms 40 \
  --model-repository "$MODELS_DIR" --concurrency 32 --max-batch-sizes 8,32 --queue-delays-us 0,1000,5000 \
  "${COMMON[@]}" --json "$RESULTS/calibration.json" | tee "$RESULTS/calibration.txt"
echo "# end part 3" >>"$COMMANDS"
fi

/usr/bin/python3 bench/summarize.py --results "$RESULTS" --build-type "${BUILD_TYPE:-unknown}" \
  >"$RESULTS/summary.md"
cat "$RESULTS/summary.md"
