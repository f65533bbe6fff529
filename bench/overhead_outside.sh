#!/usr/bin/env bash
# Issue 11's concurrency-1 overhead (server p50 minus in-process p50) as each client sees it,
# side by side: per round, the model in-process (batch 1, the model's own threads), then one
# `fastpath serve` (the example configs) loaded at c=1 by `fastpath bench` and by an outside
# client (bench/lib.sh's outside_load: wrk over HTTP binary, or h2load with HTTP_CLIENT=h2load;
# h2load over gRPC), each transport in turn. Prints each p50 and its overhead per round, then the medians.
#
# Usage: bench/overhead_outside.sh [model] [rounds] [fastpath binary]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${1:-mlp_classifier}
ROUNDS=${2:-3}
FP=${3:-$ROOT/build/src/cli/fastpath}
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT
start_server server "$FP"

p50() {  # JSON file: the last point's p50 (in-process: the model's own setting, the first)
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
print((r["in_process"][0] if r.get("in_process") else r["points"][-1])["latency_us"]["p50"])' "$1"
}
in_process() {
  "$FP" bench -m "$MODEL" --in-process --no-server --model-repository "$EXAMPLES" --batch-sizes 1 \
    --in-process-threads 1 --warmup-ms 500 --measurement-interval-ms 2000 --max-trials 3 --seed 1 \
    --json "$WORK/ip.json" > /dev/null 2>&1
  p50 "$WORK/ip.json"
}
fastpath_bench() {  # transport
  "$FP" bench -m "$MODEL" -i "$1" -u "127.0.0.1:$(server_port server "$1")" --concurrency 1 \
    --warmup-ms 1000 --measurement-interval-ms 2000 --max-trials 3 --seed 1 --json "$WORK/c1.json" > /dev/null 2>&1
  p50 "$WORK/c1.json"
}
outside() {  # transport
  local p50
  read -r _ _ p50 _ <<< "$(outside_load server "$MODEL" "$1" 1 4)"
  echo "$p50"
}

: > "$WORK/rows"
for round in $(seq "$ROUNDS"); do
  base=$(in_process)
  row="$base"
  for transport in http grpc; do
    row="$row $(fastpath_bench "$transport") $(outside "$transport")"
  done
  echo "$row" >> "$WORK/rows"
  # shellcheck disable=SC2086  # the row's five numbers, one argument each
  python3 -c 'import sys
r, load, wrk = sys.argv[1], sys.argv[2], sys.argv[3]
b, fh, oh, fg, og = map(float, sys.argv[4:])
print(f"round {r}: in-process {b:.1f} us; p50 (overhead) http: fastpath bench {fh:.1f} ({fh - b:.1f}), "
      f"{wrk} {oh:.1f} ({oh - b:.1f}); grpc: fastpath bench {fg:.1f} ({fg - b:.1f}), h2load {og:.1f} ({og - b:.1f}); "
      f"load {load}")' "$round" "$(cut -d' ' -f1 /proc/loadavg)" "${HTTP_CLIENT:-wrk}" $row
done
python3 - "$WORK/rows" "${HTTP_CLIENT:-wrk}" << 'EOF'
import statistics, sys
wrk = sys.argv[2]
rows = [[float(v) for v in line.split()] for line in open(sys.argv[1])]
b, fh, oh, fg, og = (statistics.median(r[i] for r in rows) for i in range(5))
print(f"medians: in-process {b:.1f} us; overhead http: fastpath bench {fh - b:.1f}, {wrk} {oh - b:.1f}; "
      f"grpc: fastpath bench {fg - b:.1f}, h2load {og - b:.1f} us")
EOF
