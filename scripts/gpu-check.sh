#!/usr/bin/env bash
# scripts/gpu-check.sh: the GPU fast path, end to end, in one command (issue 4 §8).
#
# On a machine with an NVIDIA GPU and no network, using only what is in the tree: builds the
# release binary, runs `fastpath doctor` (and writes a version lock from this node), generates
# the ResNet-50 example, serves it on the CUDA execution provider in the production profile
# (KIND_GPU, a start-up self-test budget, the lock just written), runs a short
# `fastpath bench` sweep at concurrency 1 and 32, and writes a report with the batching gain
# (throughput at c=32 over c=1).
#
#   scripts/gpu-check.sh [REPORT_DIR]      default: $OUT when set, else ./gpu-check-report
#
# The report directory holds at most 8 files (the device tool's limit): report.md,
# doctor.json, fastpath.lock.json, admission.json, serve.log, bench.json, bench.csv, bench.svg.
# Exit status: 0 when the model served on the GPU and the sweep ran; otherwise the failing
# step's status (serve's admission exit codes are kept: 20 lock, 22 budget, 23 not admitted).
#
# Environment:
#   FASTPATH_GPU_CHECK_BUILD   build directory (default build-release)
#   FASTPATH_GPU_CHECK_JOBS    build parallelism (default: nproc)
#   FASTPATH_GPU_CHECK_P95_MS  the self-test's p95 budget at batch 1 (default 50)
#   FASTPATH_GPU_CHECK_SKIP_BUILD=1  use the existing binary
# Needs the build dependencies (tools/setup.sh's Debian packages) and .deps/onnxruntime-1.29.0
# with its CUDA EP library on the machine; nothing is fetched when they are present. Note for
# the device tool's H200 image: it has CMake, ninja, python3 with onnx and numpy, but not the
# Debian -dev packages, and .deps (about 250 MB, the CUDA EP library alone 230 MB) is over the
# tool's 64 MiB carry limit, so there the tree cannot be built or served as is.
# Time budget: every step runs under `timeout`; the whole script stays well under 8 minutes
# on a 16-core machine (release build about 3-4 min cold, model 30 s, serve 30 s, bench 30 s).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
report_dir="${1:-${OUT:-$root/gpu-check-report}}"
build="${FASTPATH_GPU_CHECK_BUILD:-$root/build-release}"
jobs="${FASTPATH_GPU_CHECK_JOBS:-$(nproc)}"
p95_budget="${FASTPATH_GPU_CHECK_P95_MS:-50}"
work="$(mktemp -d /tmp/fastpath-gpu-check.XXXXXX)"
models="$work/models"
report="$report_dir/report.md"
started=$SECONDS
serve_pid=""

mkdir -p "$report_dir"
: >"$report"

note() { printf '%s\n' "$*" | tee -a "$report"; }
elapsed() { echo "$((SECONDS - started)) s"; }
section() { note ""; note "## $1 ($(elapsed))"; note ""; }

cleanup() {
  if [[ -n "$serve_pid" ]] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# GET url -> body on stdout; prints nothing and fails on a non-2xx status (python3 is needed
# anyway for the model generator, curl may be missing on a bare node).
http_get() {
  python3 - "$1" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        sys.stdout.write(r.read().decode())
except Exception:
    sys.exit(1)
PY
}

note "# fastpath GPU check"
note ""
note "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
note "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (uncommitted changes)')"
note "- host: $(uname -sr), $(nproc) CPUs"
if command -v nvidia-smi >/dev/null; then
  note "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
else
  note "- GPU: nvidia-smi not found"
fi

# ---- 1. build ----
section "1. build (release)"
if [[ "${FASTPATH_GPU_CHECK_SKIP_BUILD:-0}" != 1 ]]; then
  if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null ||
     [[ ! -d "$root/.deps/onnxruntime-1.29.0" ]]; then
    note "build tools or .deps/onnxruntime-1.29.0 missing: running tools/setup.sh"
    "$root/tools/setup.sh" >"$work/setup.log" 2>&1 || { tail -20 "$work/setup.log" | tee -a "$report"; exit 1; }
  fi
  if ! timeout 360 bash -c "cmake --preset release -B '$build' -DFASTPATH_BUILD_TESTS=OFF >'$work/build.log' 2>&1 &&
                            cmake --build '$build' --target fastpath -j '$jobs' >>'$work/build.log' 2>&1"; then
    note "build FAILED:"
    tail -30 "$work/build.log" | tee -a "$report"
    exit 1
  fi
fi
fastpath="$build/src/cli/fastpath"
[[ -x "$fastpath" ]] || { note "no binary at $fastpath"; exit 1; }
note "built $fastpath ($("$fastpath" version))"

# ---- 2. doctor ----
section "2. fastpath doctor"
"$fastpath" doctor --json >"$report_dir/doctor.json" 2>/dev/null || true
note '```'
timeout 60 "$fastpath" doctor 2>&1 | tee -a "$report" || true
note '```'
doctor_rc=0
timeout 60 "$fastpath" doctor --require-gpu >/dev/null 2>&1 || doctor_rc=$?
note "doctor --require-gpu exit code: $doctor_rc (0 = GPU fast path usable)"
timeout 60 "$fastpath" doctor --lock "$report_dir/fastpath.lock.json" >>"$report" 2>&1 || true

# ---- 3. the ResNet-50 example on the CUDA EP ----
section "3. ResNet-50 on KIND_GPU (CUDA EP), production profile"
if ! timeout 180 python3 "$root/tools/generate_models.py" --out "$models" --only resnet50 >"$work/generate.log" 2>&1; then
  note "model generation FAILED:"; tail -20 "$work/generate.log" | tee -a "$report"; exit 1
fi
config="$models/resnet50/config.pbtxt"
sed -i 's/kind: KIND_CPU/kind: KIND_GPU/' "$config"
cat >>"$config" <<CFG
optimization { execution_accelerators { gpu_execution_accelerator [ { name: "cuda" } ] } }
parameters { key: "fastpath.slo.p95_ms" value { string_value: "$p95_budget" } }
parameters { key: "fastpath.slo.batch_size" value { string_value: "1" } }
parameters { key: "fastpath.slo.iterations" value { string_value: "30" } }
parameters { key: "fastpath.slo.seed" value { string_value: "1" } }
CFG
note "config: KIND_GPU, accelerators [cuda], dynamic_batching (window 0), max_batch_size 32,"
note "self-test budget p95 <= ${p95_budget} ms at batch 1 over 30 runs"

"$fastpath" serve --model-repository "$models" --profile production \
  --version-lock "$report_dir/fastpath.lock.json" \
  --http-port 0 --grpc-port 0 --metrics-port 0 --port-file "$work/ports" \
  --host 127.0.0.1 >"$report_dir/serve.log" 2>&1 &
serve_pid=$!
http_port=""
for _ in $(seq 1 240); do  # up to 120 s: session creation, cuDNN autotuning, the self-test
  if ! kill -0 "$serve_pid" 2>/dev/null; then break; fi
  if [[ -s "$work/ports" ]]; then
    http_port="$(sed -n 's/.*http=\([0-9]*\).*/\1/p' "$work/ports")"
    if http_get "http://127.0.0.1:$http_port/v2/health/ready" >/dev/null; then break; fi
  fi
  sleep 0.5
done
if ! kill -0 "$serve_pid" 2>/dev/null; then
  serve_rc=0
  wait "$serve_pid" || serve_rc=$?
  serve_pid=""
  note "fastpath serve REFUSED to start, exit code $serve_rc (docs/runbooks/admission.md):"
  note '```'
  tail -25 "$report_dir/serve.log" | tee -a "$report"
  note '```'
  exit "$serve_rc"
fi
if ! http_get "http://127.0.0.1:$http_port/v2/health/ready" >/dev/null; then
  note "fastpath serve did not become ready within 120 s"
  http_get "http://127.0.0.1:$http_port/v2/health/admission" >"$report_dir/admission.json" || true
  tail -25 "$report_dir/serve.log" | tee -a "$report"
  exit 1
fi
http_get "http://127.0.0.1:$http_port/v2/health/admission" >"$report_dir/admission.json"
note "ready on port $http_port. Admission:"
python3 - "$report_dir/admission.json" <<'PY' | tee -a "$report"
import json, sys
doc = json.load(open(sys.argv[1]))
print(f"- profile {doc['profile']}, ready {doc['ready']}, version lock {(doc.get('version_lock') or {}).get('file')}")
for m in doc["models"]:
    st = m.get("self_test") or {}
    print(f"- {m['name']} v{m['version']}: {m['state']} {'; '.join(m['reasons'])}")
    if st:
        print(f"  - self-test: {st['summary']}")
    for inst in (m.get("placement") or {}).get("instances", []):
        print(f"  - placement: {inst['summary']}")
PY

# ---- 4. bench sweep ----
section "4. fastpath bench: concurrency 1 and 32"
bench_rc=0
timeout 150 "$fastpath" bench -m resnet50 -u "127.0.0.1:$http_port" --concurrency 1,32 \
  --warmup-ms 2000 --measurement-interval-ms 3000 --max-trials 5 --label "resnet50 cuda" \
  --json "$report_dir/bench.json" --csv "$report_dir/bench.csv" --svg "$report_dir/bench.svg" \
  -q >"$work/bench.log" 2>&1 || bench_rc=$?
note '```'
tee -a "$report" <"$work/bench.log"
note '```'
if [[ $bench_rc -ne 0 ]]; then note "bench FAILED with exit code $bench_rc"; exit "$bench_rc"; fi
python3 - "$report_dir/bench.json" <<'PY' | tee -a "$report"
import json, sys
run = json.load(open(sys.argv[1]))["runs"][-1]
points = {p["concurrency"]: p for p in run["points"]}
print("| concurrency | throughput (inf/s) | p50 ms | p95 ms | p99 ms | avg server batch | errors |")
print("|---|---|---|---|---|---|---|")
for c in sorted(points):
    p = points[c]; lat = p["latency_us"]; srv = p.get("server") or {}
    print(f"| {c} | {p['throughput_ips']:.1f} | {lat['p50']/1000:.2f} | {lat['p95']/1000:.2f} | "
          f"{lat['p99']/1000:.2f} | {srv.get('average_batch', 0):.2f} | {p['errors']} |")
if 1 in points and 32 in points and points[1]["throughput_ips"] > 0:
    gain = points[32]["throughput_ips"] / points[1]["throughput_ips"]
    print(f"\nbatching gain (throughput at c=32 / c=1): {gain:.2f}x")
PY

kill -TERM "$serve_pid" 2>/dev/null || true
serve_rc=0
wait "$serve_pid" || serve_rc=$?
serve_pid=""
section "done"
note "serve stopped with exit code $serve_rc; total $(elapsed); files in $report_dir"
