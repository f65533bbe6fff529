#!/usr/bin/env bash
# gRPC's server against nghttp2 under the same outside client (issue 11 §2): bench/grpc_ab's
# `pure:1` style (ModelInfer on gRPC 1.51's async API, one completion queue and thread, what
# fastpath's gRPC front end is built on) and its `nghttp2` style (ModelInfer on nghttp2 and
# epoll, one thread), each answering at once with no model behind it, loaded in turn by
# h2load at concurrency 1 with the MLP's request (bench/outside_requests.py). Prints each
# side's p50 per round (from h2load's log of every request), then the medians and their ratio.
#
# Usage: bench/grpc_stacks.sh [rounds] [requests per run]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-4}
REQUESTS=${2:-3000}
AB=$ROOT/build/bench/grpc_ab/grpc_ab
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT
# The request body: outside_requests reads the model's metadata from a fastpath server.
start_server server "$ROOT/build/src/cli/fastpath"
outside_requests server mlp_classifier
stop_servers
SERVERS=()
port=$((20000 + $$ % 20000))
declare -A PORT
for style in pure:1 nghttp2; do
  mkfifo "$WORK/ready.$port"
  "$AB" --serve "$style" "$port" 3 3> "$WORK/ready.$port" &
  SERVERS+=($!)
  head -c 1 "$WORK/ready.$port" > /dev/null  # the style writes one byte once it listens
  PORT[$style]=$port
  port=$((port + 1))
done
p50() {  # port
  h2load -t 1 -c 1 -m 1 -n "$REQUESTS" -d "$WORK/outside/mlp_classifier.grpc" \
    -H 'content-type: application/grpc' -H 'te: trailers' --log-file "$WORK/log" \
    "http://127.0.0.1:$1/inference.GRPCInferenceService/ModelInfer" | grep -q " $REQUESTS succeeded" ||
    { echo "grpc_stacks: not every request succeeded on port $1" >&2; return 1; }
  python3 -c 'import sys; d = sorted(float(l.split()[2]) for l in open(sys.argv[1])); print(d[len(d) // 2])' "$WORK/log"
}
: > "$WORK/rows"
for round in $(seq "$ROUNDS"); do
  a=$(p50 "${PORT[pure:1]}")
  b=$(p50 "${PORT[nghttp2]}")
  echo "$a $b" >> "$WORK/rows"
  echo "round $round: p50 gRPC (pure:1) $a us, nghttp2 $b us; load $(cut -d' ' -f1 /proc/loadavg)"
done
python3 - "$WORK/rows" << 'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
a, b = (statistics.median(r[i] for r in rows) for i in range(2))
print(f"medians: gRPC {a:.1f} us, nghttp2 {b:.1f} us; nghttp2 / gRPC {b / a:.3f}")
PY
