#!/usr/bin/env bash
# Issue 11, threads by default: the example CNN served with its unmodified config (threads
# from the usable cores) against the same config pinned to one intra-op thread (the old
# default), A/B/A/B in one run so that the machine's load affects both alike. Prints the
# server lines of `fastpath bench` (HTTP binary, concurrency 32) for each run.
# Usage: bench/threads_ab.sh [build-dir]   (default: build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FP="$ROOT/${1:-build}/src/cli/fastpath"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/default" "$WORK/one_thread"
cp -r "$ROOT/models/example/cnn_classifier" "$WORK/default/"
cp -r "$ROOT/models/example/cnn_classifier" "$WORK/one_thread/"
echo 'parameters { key: "intra_op_thread_count" value { string_value: "1" } }' \
  >> "$WORK/one_thread/cnn_classifier/config.pbtxt"
for round in 1 2; do
  for variant in default one_thread; do
    "$FP" serve --model-repository "$WORK/$variant" --http-port 0 --grpc-port 0 --metrics-port 0 \
      --port-file "$WORK/port" --host 127.0.0.1 > "$WORK/serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do [ -s "$WORK/port" ] && break; sleep 0.1; done
    port=$(grep -o "http=[0-9]*" "$WORK/port" | cut -d= -f2)
    grep -h "intra-op" "$WORK/serve.log" || true
    "$FP" bench -m cnn_classifier -u "127.0.0.1:$port" --encoding binary --concurrency 32 \
      --warmup-ms 1000 --measurement-interval-ms 3000 --max-trials 4 --seed 1 \
      --label "$variant round $round" | grep -A1 '^point' | sed "s/^/$variant round $round: /"
    kill -TERM "$pid"; wait "$pid" || true
    rm -f "$WORK/port"
  done
done
