#!/usr/bin/env bash
# Instructions per request: one `fastpath serve` under valgrind's callgrind, the counters zeroed
# after a warm-up, then N requests at c=1 from h2load (HTTP binary or gRPC), and the counts
# read back: the whole process's instructions over N, by object (library) and the top
# functions by their own count, and the allocation calls per request. A count, not a timing:
# it is the same on a busy machine and a quiet one, so two binaries can be compared where
# their timings drown in this machine's drift (callgrind adds no cache or kernel time).
# CONCURRENCY (default 1) sets h2load's connections, e.g. 32 for the front end's cost per
# request when calls batch.
#
# Usage: bench/instructions.sh [http|grpc] [model] [requests] [fastpath] [top functions]
#   e.g. bench/instructions.sh grpc mlp_classifier 500 build/src/cli/fastpath 30
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRANSPORT=${1:-grpc}
MODEL=${2:-mlp_classifier}
REQUESTS=${3:-500}
FP=$(readlink -f "${4:-$ROOT/build/src/cli/fastpath}")
TOP=${5:-20}
CONCURRENCY=${CONCURRENCY:-1}
command -v valgrind > /dev/null || { echo "instructions.sh: valgrind is missing" >&2; exit 1; }
WORK=$(mktemp -d)
source "$ROOT/bench/lib.sh"
trap 'stop_servers; rm -rf "$WORK"' EXIT
cat > "$WORK/fastpath" << SH
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$WORK/callgrind.out "$FP" "\$@"
SH
chmod +x "$WORK/fastpath"
START_SECONDS=300 start_server server "$WORK/fastpath"  # valgrind starts it 20-50x slower
PID=${SERVERS[-1]}
outside_requests server "$MODEL"
h2load_count server "$MODEL" "$TRANSPORT" "$CONCURRENCY" 300
callgrind_control -z "$PID" > /dev/null 2>&1
h2load_count server "$MODEL" "$TRANSPORT" "$CONCURRENCY" "$REQUESTS"
callgrind_control -d "$PID" > /dev/null 2>&1
for _ in $(seq 50); do [ -s "$WORK/callgrind.out.1" ] && break; sleep 0.2; done
echo "$(basename "$FP"): $TRANSPORT, $MODEL, $REQUESTS requests at c=$CONCURRENCY; $(grep -o 'memory allocator: .*' "$WORK/server.log")"
python3 - "$WORK/callgrind.out.1" "$REQUESTS" "$TOP" << 'PY'
import collections, re, sys
path, n, top = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
names = {"fn": {}, "ob": {}}
def name(kind, value):  # callgrind's name compression: "(id) name" once, then "(id)"
    m = re.match(r"\((\d+)\)(?: (.*))?", value)
    if not m:
        return value
    if m.group(2) is not None:
        names[kind][m.group(1)] = m.group(2)
    return names[kind].get(m.group(1), value)
own, by_object, calls = collections.Counter(), collections.Counter(), collections.Counter()
fn = ob = callee = None
after_calls = False
for line in open(path):
    line = line.rstrip("\n")
    if line.startswith("fn="):
        fn = name("fn", line[3:])
    elif line.startswith("ob="):
        ob = name("ob", line[3:]).rsplit("/", 1)[-1]
    elif line.startswith("cob="):
        name("ob", line[4:])
    elif line.startswith("cfn="):
        callee = name("fn", line[4:])
    elif line.startswith("calls="):
        if not (fn or "").startswith("operator new"):  # glibc's operator new calls malloc
            calls[callee] += int(line[6:].split()[0])
        after_calls = True  # the next cost line is the call's inclusive cost
    elif line[:1].isdigit() or line[:1] in "+-*":
        fields = line.split()
        if len(fields) < 2:
            continue
        if after_calls:
            after_calls = False
            continue
        own[(ob, fn)] += int(fields[1])
        by_object[ob] += int(fields[1])
total = sum(by_object.values())
print(f"instructions per request: {total / n:.0f}")
print("by object:")
for ob, count in by_object.most_common(10):
    print(f"{count / n:10.0f} {100 * count / total:5.1f}%  {ob}")
allocations = sum(calls[f] for f in ("malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign"))
new = sum(count for f, count in calls.items() if f and f.startswith("operator new"))
print(f"allocations per request: operator new {new / n:.1f}, malloc family {allocations / n:.1f}")
print(f"top {top} functions by their own instructions:")
for (ob, fn), count in own.most_common(top):
    print(f"{count / n:10.0f} {100 * count / total:5.1f}%  {ob}: {(fn or '?')[:110]}")
PY
