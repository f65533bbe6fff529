#!/usr/bin/env bash
# A model served with no config.pbtxt, as a new user serves one: its auto-completed config now
# has `dynamic_batching {}` (max_batch_size 4, no wait window), as Triton's ONNX Runtime backend
# completes it. Compared, A/B/A/B in one run, with the config the completion wrote before that
# change: the same max_batch_size, inputs and outputs, and no batcher (each request runs alone).
# Each example model, HTTP binary, concurrency 32; prints `fastpath bench`'s server line and the
# average batch (inferences per execution) for each run.
# Usage: bench/no_config_ab.sh [rounds] [fastpath binary]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-2}
FP=${2:-$ROOT/build/src/cli/fastpath}
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT
MODELS=(mlp_classifier cnn_classifier transformer_encoder)
for model in "${MODELS[@]}"; do
  mkdir -p "$WORK/no_config/$model" "$WORK/unbatched/$model"
  cp -r "$EXAMPLES/$model/1" "$WORK/no_config/$model/"
  cp -r "$EXAMPLES/$model/1" "$WORK/unbatched/$model/"
  # The example config without its batcher and with the completion's max_batch_size.
  python3 - "$EXAMPLES/$model/config.pbtxt" "$WORK/unbatched/$model/config.pbtxt" << 'EOF'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"max_batch_size: \d+", "max_batch_size: 4", text)
text = re.sub(r"dynamic_batching \{[^}]*\}\n?", "", text)
open(sys.argv[2], "w").write(text)
EOF
done
EXAMPLES_SAVED=$EXAMPLES
for round in $(seq "$ROUNDS"); do
  for variant in unbatched no_config; do
    EXAMPLES=$WORK/$variant
    start_server "$variant" "$FP"
    port=$(server_port "$variant" http)
    for model in "${MODELS[@]}"; do
      before=$(model_executions "http://127.0.0.1:$port" "$model")
      line=$(pinned "${CLIENT_CPUS:-}" "$FP" bench -m "$model" -u "127.0.0.1:$port" --encoding binary \
        --concurrency 32 --warmup-ms 1000 --measurement-interval-ms 3000 --max-trials 1 --seed 1 \
        | grep -A1 '^point' | tail -1)
      after=$(model_executions "http://127.0.0.1:$port" "$model")
      batch=$(python3 -c 'import sys; a = sys.argv[1].split(); b = sys.argv[2].split()
print("%.1f" % ((int(b[0]) - int(a[0])) / max(1, int(b[1]) - int(a[1]))))' "$before" "$after")
      echo "round $round $variant $model: avg batch $batch | $line"
    done
    kill -TERM "${SERVERS[-1]}"
    wait "${SERVERS[-1]}" || true
    rm -f "$WORK/$variant.port"  # start_server waits for a new one
  done
done
EXAMPLES=$EXAMPLES_SAVED
