#!/usr/bin/env bash
# Issue 11's peer target, side by side: fastpath (the example configs, unmodified) against the
# hand-written Node.js peer (bench/peer/node) on one model, in the peer's own encoding (JSON
# by default). Both servers run at once; each round measures one and then the other, the
# order alternating, so that the machine's load weighs on both alike. Prints each round and
# the fastpath/peer ratios of the medians: throughput (target >= 2) and p99 (target < 1).
#
# Usage: bench/peer_ab.sh [fastpath-binary] [model] [concurrency] [rounds]
#   e.g. bench/peer_ab.sh build/src/cli/fastpath cnn_classifier 16 4
# ENCODING=binary measures the binary tensor extension instead (the peer speaks both).
# PEER_THREADS sets the peer's intra-op threads (default 1, its own default; 0 lets ONNX
# Runtime pick, as a hand-written server that sets nothing would).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build/src/cli/fastpath}
MODEL=${2:-cnn_classifier}
CONCURRENCY=${3:-16}
ROUNDS=${4:-4}
ENCODING=${ENCODING:-json}
PEER_THREADS=${PEER_THREADS:-1}
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT

PEER_DIR=$ROOT/bench/peer/node
if [ ! -d "$PEER_DIR/node_modules/onnxruntime-node" ]; then
  (cd "$PEER_DIR" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund > /dev/null)
fi
start_server fastpath "$BIN"
node "$PEER_DIR/server.js" --model-repository "$EXAMPLES" --model "$MODEL" --port 0 \
  --threads "$PEER_THREADS" --port-file "$WORK/peer.port" > "$WORK/peer.log" 2>&1 &
SERVERS+=($!)
for _ in $(seq 300); do [ -s "$WORK/peer.port" ] && break; sleep 0.1; done
[ -s "$WORK/peer.port" ] || { cat "$WORK/peer.log" >&2; exit 1; }

measure() {  # port
  "$BIN" bench -m "$MODEL" -u "127.0.0.1:$1" --encoding "$ENCODING" --concurrency "$CONCURRENCY" \
    --warmup-ms 1000 --measurement-interval-ms 2000 --max-trials 3 --seed 1 --json "$WORK/out.json" \
    > /dev/null 2>&1
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["runs"][0]["points"][-1]; print(p["throughput_ips"], p["latency_us"]["p99"], p["errors"])' "$WORK/out.json"
}

: > "$WORK/fastpath.rows"
: > "$WORK/peer.rows"
for round in $(seq "$ROUNDS"); do
  order="fastpath peer"
  [ $((round % 2)) = 0 ] && order="peer fastpath"
  for side in $order; do
    if [ "$side" = peer ]; then
      port=$(grep -o 'http=[0-9]*' "$WORK/peer.port" | cut -d= -f2)
    else
      port=$(server_port fastpath http)
    fi
    read -r rate p99 errors < <(measure "$port")
    echo "$rate $p99" >> "$WORK/$side.rows"
    echo "round $round $side: ${rate} infer/s, p99 ${p99} us, errors ${errors}, load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
python3 - "$WORK/fastpath.rows" "$WORK/peer.rows" "$MODEL $ENCODING c=$CONCURRENCY, peer threads $PEER_THREADS" << 'EOF'
import statistics, sys
f = [[float(v) for v in x.split()] for x in open(sys.argv[1])]
p = [[float(v) for v in x.split()] for x in open(sys.argv[2])]
tf, tp = (statistics.median(r[0] for r in s) for s in (f, p))
lf, lp = (statistics.median(r[1] for r in s) for s in (f, p))
print(f"{sys.argv[3]}: median throughput fastpath {tf:.0f}, peer {tp:.0f} infer/s, fastpath/peer {tf / tp:.2f}")
print(f"{sys.argv[3]}: median p99 fastpath {lf:.0f}, peer {lp:.0f} us, fastpath/peer {lf / lp:.2f}")
EOF
