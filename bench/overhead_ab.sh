#!/usr/bin/env bash
# Issue 11 §3, before and after: the concurrency-1 round trip of two fastpath binaries on the
# same model, side by side in one run. Both servers run at once (idle but one), and each
# measurement alternates between them (A B, then B A, ...), so that the machine's load
# weighs on both alike. Prints p50/p99 per round and the B/A ratio of the medians, over HTTP
# binary and gRPC, and the in-process p50 (batch 1, the model's own threads) once per side.
#
# Usage: bench/overhead_ab.sh A_FASTPATH B_FASTPATH [model] [rounds] [concurrency]
#   e.g. bench/overhead_ab.sh /tmp/before/build/src/cli/fastpath build/src/cli/fastpath
# At a concurrency above 1 (the no-regression check at c=32) compare the throughput line.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$1
B=$2
MODEL=${3:-mlp_classifier}
ROUNDS=${4:-4}
CONCURRENCY=${5:-1}
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT
start_server a "$A"
start_server b "$B"

measure() {  # side binary transport
  local url="127.0.0.1:$(server_port "$1" "$3")"
  "$2" bench -m "$MODEL" -i "$3" -u "$url" --concurrency "$CONCURRENCY" --warmup-ms 1000 \
    --measurement-interval-ms 2000 --max-trials 3 --seed 1 --json "$WORK/out.json" > /dev/null 2>&1
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["runs"][0]["points"][-1]; l=p["latency_us"]; print(l["p50"], l["p99"], p["errors"], p["throughput_ips"])' "$WORK/out.json"
}

for transport in http grpc; do
  : > "$WORK/$transport.a"
  : > "$WORK/$transport.b"
done
for round in $(seq "$ROUNDS"); do
  order="a b"
  [ $((round % 2)) = 0 ] && order="b a"
  for transport in http grpc; do
    for side in $order; do
      bin=$A
      [ "$side" = b ] && bin=$B
      read -r p50 p99 errors rate < <(measure "$side" "$bin" "$transport")
      echo "$p50 $rate" >> "$WORK/$transport.$side"
      echo "round $round $transport $side: p50 ${p50} us, p99 ${p99} us, ${rate} infer/s, errors ${errors}, load $(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
for transport in http grpc; do
  python3 - "$WORK/$transport.a" "$WORK/$transport.b" "$transport" << 'EOF'
import statistics, sys
a = [[float(v) for v in x.split()] for x in open(sys.argv[1])]
b = [[float(v) for v in x.split()] for x in open(sys.argv[2])]
ma, mb = (statistics.median(r[0] for r in s) for s in (a, b))
print(f"{sys.argv[3]}: median p50 A {ma:.1f} us, B {mb:.1f} us, B/A {mb / ma:.3f}")
ta, tb = (statistics.median(r[1] for r in s) for s in (a, b))
print(f"{sys.argv[3]}: median throughput A {ta:.0f}, B {tb:.0f} infer/s, B/A {tb / ta:.3f}")
EOF
done
for side in a b; do
  bin=$A
  [ "$side" = b ] && bin=$B
  "$bin" bench -m "$MODEL" -u "127.0.0.1:$(server_port "$side" http)" --concurrency 1 --in-process \
    --model-repository "$EXAMPLES" --batch-sizes 1 --warmup-ms 1000 --measurement-interval-ms 2000 \
    --max-trials 3 --seed 1 --json "$WORK/ip.json" > /dev/null 2>&1 || true
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(sys.argv[2], "in-process p50 (batch 1, each thread setting):", [p["latency_us"]["p50"] for p in r["in_process"]], "us")' "$WORK/ip.json" "$side" || true
done
