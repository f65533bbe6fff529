#!/bin/bash
# Start and stop time of `fastpath serve` on a repository of N copies of the simple test model,
# each binary in turn on the same repository (ratios from one run; the machine is noisy).
# usage: bench/stop_at_scale.sh N BINARY... (e.g. build/src/cli/fastpath and an older copy)
set -euo pipefail
n=$1; shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model="$(dirname "$0")/../build/test_models/simple.onnx"
for i in $(seq 1 "$n"); do
  mkdir -p "$work/repo/m$i/1" && cp "$model" "$work/repo/m$i/1/model.onnx"
done
for bin in "$@"; do
  rm -f "$work/ports"
  t0=$(date +%s.%N)
  "$bin" serve --model-repository "$work/repo" --host 127.0.0.1 --http-port 0 --grpc-port 0 \
    --metrics-port 0 --port-file "$work/ports" > "$work/log" 2>&1 &
  pid=$!
  until [ -s "$work/ports" ]; do
    kill -0 "$pid" 2>/dev/null || { echo "$bin exited during start-up"; tail -3 "$work/log"; exit 1; }
    sleep 0.1
  done
  t1=$(date +%s.%N)
  kill -TERM "$pid"; wait "$pid" || true
  t2=$(date +%s.%N)
  echo "$bin: $n models, start $(echo "$t1 - $t0" | bc) s, stop $(echo "$t2 - $t1" | bc) s"
done
