#!/usr/bin/env bash
# The runtime bundle, black-box: tools/bundle.sh packs this build's fastpath (--from-build,
# no tarball), tools/check_bundle.py finds every library inside it or in the base system's
# C/C++ runtime, and the bundled binary runs with an empty environment from a folder that is
# not the build tree: doctor says the bundle is CPU-only, and serve answers an inference on
# loopback for a repository written by the bundled model generator.
#   bundle_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir="$1"
build_dir="$2"
work="$(mktemp -d /tmp/fastpath-bundle-test.XXXXXX)"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$source_dir/tools/bundle.sh" --from-build "$build_dir" --no-pack "$work/out" >"$work/bundle.log" 2>&1 ||
  { cat "$work/bundle.log" >&2; fail "tools/bundle.sh failed"; }
bundle="$work/out/fastpath"
# Moved after bundling: nothing may point back at where it was made.
mv "$bundle" "$work/moved" && bundle="$work/moved"
python3 "$source_dir/tools/check_bundle.py" "$bundle" || fail "the bundle is not closed"
for f in bin/fastpath lib/libonnxruntime.so.1 share/fastpath/generate_models.py \
         share/fastpath/bundle.json share/fastpath/prometheus/fastpath-rules.yaml \
         share/fastpath/gpu-check.sh share/fastpath/cpu-efficiency.sh; do
  [[ -f "$bundle/$f" ]] || fail "$f is missing from the bundle"
done
[[ ! -e "$bundle/lib/libonnxruntime_providers_cuda.so" ]] ||
  fail "a CPU bundle carries the CUDA provider library"
python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["cuda_archs"] == [], b' \
  "$bundle/share/fastpath/bundle.json" || fail "bundle.json does not say CPU-only"

run() { env -i HOME="$work" PATH=/usr/bin:/bin "$@"; }
run "$bundle/bin/fastpath" doctor --json >"$work/doctor.json" 2>"$work/doctor.err" || true
python3 - "$work/doctor.json" <<'PY' || fail "doctor --json from the bundle"
import json, sys
doc = json.load(open(sys.argv[1]))
ort = doc["onnxruntime"]
assert ort["version"] == "1.29.0", ort
cuda = [p for p in ort["execution_providers"] if p["provider"] == "cuda"][0]
assert "this is a CPU-only fastpath bundle" in cuda["error"], cuda["error"]
assert ort["ep_library_dir"].endswith("/moved/lib"), ort["ep_library_dir"]
PY

run python3 "$bundle/share/fastpath/generate_models.py" --out "$work/models" \
  --only mlp_classifier >"$work/generate.log" 2>&1 ||
  { cat "$work/generate.log" >&2; fail "the bundled model generator"; }
(cd "$work" && exec env -i HOME="$work" PATH=/usr/bin:/bin "$bundle/bin/fastpath" serve \
  --model-repository "$work/models" \
  --http-port 0 --grpc-port 0 --metrics-port 0 --port-file "$work/ports" \
  >"$work/serve.log" 2>&1) &
server_pid=$!
python3 - "$work/ports" <<'PY' || { cat "$work/serve.log" >&2; fail "inference through the bundle"; }
import json, os, re, sys, time, urllib.request
deadline = time.time() + 60
port = None
while time.time() < deadline:
    if os.path.exists(sys.argv[1]):
        m = re.search(r"http=(\d+)", open(sys.argv[1]).read())
        if m:
            port = int(m.group(1))
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2)
                break
            except Exception:
                pass
    time.sleep(0.2)
else:
    sys.exit("not ready within 60 s")
body = json.dumps({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32",
                               "data": [0.1] * 64}]}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/mlp_classifier/infer", body)
out = json.load(urllib.request.urlopen(req, timeout=10))["outputs"][0]
assert out["shape"] == [1, 10], out
assert abs(sum(out["data"]) - 1.0) < 1e-4, out  # softmax probabilities
PY
kill -TERM "$server_pid"
wait "$server_pid" || fail "serve did not stop cleanly on SIGTERM"
server_pid=""

# The CPU efficiency script the GPU session runs from the bundle (it cannot be debugged
# there): one short round, server and client each on their own CPUs, makes its table.
if (($(nproc) >= 2)); then
  run env ROUNDS=1 MEASURE_MS=1500 OUT="$work/cpu" "$bundle/share/fastpath/cpu-efficiency.sh" \
    >"$work/cpu.log" 2>&1 || { cat "$work/cpu.log" >&2; fail "cpu-efficiency.sh from the bundle"; }
  cat "$work/cpu/report.md"
  python3 - "$work/cpu/report.md" <<'PY' || { cat "$work/cpu.log" >&2; fail "cpu-efficiency.sh's report"; }
import re, sys
text = open(sys.argv[1]).read()
row = re.search(r"^\| 1 \| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
assert row, text
http, ceiling, grpc, eh, eg = map(float, row.groups())
assert min(http, ceiling, grpc) > 0, row.group(0)
assert abs(eh - http / ceiling) < 0.002 and abs(eg - grpc / ceiling) < 0.002, row.group(0)
assert re.search(r"\d+ usable cores from the affinity mask", text), text  # its CPU set
# Where the server's CPUs went: a row per transport, its busiest front-end thread named, and
# the model's worker busy while loaded (a front-end thread's share can read 0.00: the kernel
# counts CPU time in 10 ms ticks, and the window is under a second).
for transport in ("http", "grpc"):
    row = re.search(rf"^\| 1 \| {transport} \| fp-{transport}/\d+ \| ([\d.]+) \| ([\d.]+) \| "
                    r"([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert row, (transport, text)
    busiest, front, model, pool, server = map(float, row.groups())
    assert busiest <= front < server and 0 < model <= server, row.group(0)
PY
fi
server_pid=""
echo "bundle test: passed"
