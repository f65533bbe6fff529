#!/usr/bin/env bash
# The loopback TCP round trip between two threads on this machine, blocking and spinning
# (bench/tcp_floor/tcp_floor.cc): the floor under `fastpath bench`'s concurrency-1 figures.
# Usage: bench/tcp_floor.sh [bytes]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
g++ -O2 -std=c++17 -pthread "$ROOT/bench/tcp_floor/tcp_floor.cc" -o "$WORK/tcp_floor"
"$WORK/tcp_floor" "${1:-200}"
"$WORK/tcp_floor" "${1:-200}" --spin
"$WORK/tcp_floor" "${1:-200}"
