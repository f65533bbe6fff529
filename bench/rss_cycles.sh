#!/usr/bin/env bash
# The server's resident memory over model reloads and traffic, for one or more `fastpath`
# binaries side by side (e.g. linked with jemalloc and with -DFASTPATH_ALLOCATOR=system). Each
# binary serves the example models (explicit model control); each cycle unloads and loads every
# example model, then sends 3000 CNN requests at c=32 and 3000 transformer requests at c=8
# (HTTP binary, h2load), so batches of many sizes come and go. The binaries take turns cycle
# by cycle. Prints each one's VmRSS at the start and every 5 cycles: memory that malloc keeps
# after it is freed shows as growth from cycle to cycle.
#
# Usage: bench/rss_cycles.sh CYCLES FASTPATH [FASTPATH...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CYCLES=${1:?usage: bench/rss_cycles.sh CYCLES FASTPATH [FASTPATH...]}
shift
[ $# -ge 1 ] || { echo "usage: bench/rss_cycles.sh CYCLES FASTPATH [FASTPATH...]" >&2; exit 2; }
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT
names=()
for i in $(seq $#); do
  name=s$i
  start_server "$name" "${!i}" --model-control-mode explicit --load-model '*'
  names+=("$name")
  echo "$name: ${!i}"
done
for name in "${names[@]}"; do
  curl -sf "http://127.0.0.1:$(server_port "$name" http)/v2/health/ready" > /dev/null ||
    { echo "$name is not ready; its log:" >&2; cat "$WORK/$name.log" >&2; exit 1; }
done
outside_requests "${names[0]}" cnn_classifier
outside_requests "${names[0]}" transformer_encoder
rss_mib() { awk '/VmRSS/ {printf "%d", $2 / 1024}' "/proc/$1/status"; }
for i in $(seq ${#names[@]}); do
  name=${names[$((i - 1))]}
  echo "$name: allocator $(grep -o 'memory allocator: .*' "$WORK/$name.log" | cut -d' ' -f3-), start RSS $(rss_mib "${SERVERS[$((i - 1))]}") MiB"
done
for cycle in $(seq "$CYCLES"); do
  for i in $(seq ${#names[@]}); do
    name=${names[$((i - 1))]}
    url=http://127.0.0.1:$(server_port "$name" http)
    for model in cnn_classifier transformer_encoder mlp_classifier; do
      curl -sf -X POST "$url/v2/repository/models/$model/unload" > /dev/null
      curl -sf -X POST "$url/v2/repository/models/$model/load" > /dev/null
    done
    h2load_count "$name" cnn_classifier http 32 3000
    h2load_count "$name" transformer_encoder http 8 3000
    if ((cycle % 5 == 0)); then
      echo "$name: cycle $cycle RSS $(rss_mib "${SERVERS[$((i - 1))]}") MiB"
    fi
  done
done
