#!/usr/bin/env bash
# fastpath-gpu-check: every GPU claim of fastpath proven in one call, run from the unpacked
# runtime bundle on a GPU machine (issue 9 §4). tools/bundle.sh installs this file as
# fastpath/share/fastpath/gpu-check.sh; the bundle root is two folders up from it.
#
# Usage:
#   fastpath/share/fastpath/gpu-check.sh [REPORT_DIR]
#
#   The report folder is $OUT when set, else REPORT_DIR, else ./gpu-check-report.
#
# What it needs: the bundle (bin/fastpath, lib/, share/fastpath/generate_models.py and
# make_test_models.py), python3 with onnx and numpy (for the models), an NVIDIA driver and
# GPU, and CUDA's runtime libraries somewhere on the machine. It never builds, fetches or
# compiles anything, and reads no file outside the bundle besides what the host provides.
#
# CUDA's runtime libraries (libcudart.so.13, libcublas(Lt).so.13, libcurand.so.10,
# libcufft.so.12, libcudnn*.so.9) are not in the bundle: they are the host's. The check
# looks for them in the nvidia/*/lib folders of every Python environment it can find
# (pip's nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn-cu13, ... wheels, as on the H200
# image), in /usr/local/cuda/lib64, and in $FASTPATH_GPU_CHECK_CUDA_LIBS, and prepends the
# folders it finds to LD_LIBRARY_PATH for the fastpath processes it starts (only those).
#
# The checks, one line each in report.md, PASS or FAIL with the measured figures (the
# TensorRT line is SKIP when TensorRT is unavailable, with the reason):
#   1. `fastpath doctor --require-gpu` exits 0 and names the GPU, its compute capability and
#      the driver. If it fails, the check stops right there (everything else needs the GPU)
#      and exits with doctor's exit code (10-17; 1 when there is no binary).
#   2. ResNet-50 on KIND_GPU with the cuda accelerator is admitted by
#      `serve --profile production`, every compute node on CUDAExecutionProvider according to
#      the placement audit in GET /v2/health/admission.
#   3. The same model with CUDA_VISIBLE_DEVICES= (no device visible) is refused: serve exits
#      23 and its log names why (the silent CPU fallback, on real hardware).
#   4. The IO-binding staged path is used: a count of staged runs (admission's
#      models[].placement.instances[].staged_runs) against the executions in statistics.
#   5. A model with a BYTES output (Gemm on CUDA, Cast to STRING) on a GPU instance answers
#      correctly.
#   6. gpu_mem_limit is accepted, a request needing more GPU memory than the limit gets a
#      clean error (HTTP 4xx/5xx with a JSON error), and the server keeps serving.
#   7. An FP16 model (make_test_models.py's fp16_add) passes the accuracy guard against its
#      FP32 reference (fp32_add) at start-up on the GPU.
#   8. ResNet-50 with dynamic batching, `fastpath bench` at concurrency 1, 8, 16, 32: the
#      batching gain (c=32 over c=1) against 8.2x, p99 at c=32 against 40 ms, and the
#      efficiency against in-process ONNX Runtime on CUDA (`bench --in-process`, the same
#      config) at its best batch size, against 0.90. Each point also reports the GPU's
#      average utilization over its windows (`bench --collect-metrics`, no goal).
#   9. TensorRT available or unavailable, with the reason (doctor --json).
#  10. A forced out of memory on the GPU is one clean error: make_test_models.py's add_one
#      (OUTPUT0 = INPUT0 + 1, dims [-1]) on KIND_GPU with parameters
#      fastpath.memory.limit_bytes "16Mi"; a [1, 8388608] FP32 request (32 MiB in, 32 MiB
#      out) gets HTTP 503 with Retry-After (it ran out on the GPU) or 413 (refused before it
#      ran) and an error starting "out of memory"; a small request before and after it
#      answers 200, and /v2/health/ready is still 200.
#  11. GPU telemetry over NVML, live while serving, on check 8's server: GET
#      /v2/health/admission's gpu_telemetry has an NVML source and samples a GPU that is the
#      one doctor named (same index, memory total within 5%, and nvidia-smi's name for its
#      UUID where nvidia-smi is on PATH), sampled again 2 s later and not quarantined; GET
#      /metrics on the metrics port has fastpath_gpu_* samples for it with memory used > 0
#      (the figures: utilization, memory, temperature, power, SM clock, clock-event reasons,
#      ECC, XIDs); and `fastpath doctor --record-gpu-trace --seconds 10 --interval-ms 250`,
#      run beside check 8's sweep, records at least 2 samples of it with utilization > 0.
#      When telemetry is off, the line gives serve's reason ("GPU telemetry off: ...").
#
# Outputs (at most 8 files in the report folder): report.md, doctor.json (doctor --json),
# admission.json (ResNet-50's server after the load, with its gpu_telemetry), stats.json
# (its statistics), bench.json and bench.csv (server sweep, then the in-process run
# appended), serve.log (every server's log, one after another), responses.jsonl (the HTTP
# answers of checks 5-7 and 10). Check 11's trace stays in the work folder (kept with
# FASTPATH_GPU_CHECK_KEEP=1); its figures are in report.md.
#
# Exit status: 0 when every check passed (SKIP counts as passed); 1 when one failed; doctor's
# exit code (10-17) when the GPU fast path is not usable at all (check 1); 1 when no
# bin/fastpath is found.
#
# Time: every step runs under `timeout`, within a total budget of 450 s (under the 8 minutes
# asked); a step that no longer fits is reported as not run. About 2-3 minutes on an H200.
#
# Environment:
#   OUT                              report folder (takes precedence over REPORT_DIR)
#   FASTPATH_BUNDLE                  bundle root (default: this script's ../..)
#   FASTPATH_GPU_CHECK_PYTHON        python3 with onnx and numpy (default: python3 on PATH,
#                                    else /usr/bin/python3)
#   FASTPATH_GPU_CHECK_CUDA_LIBS     extra folders with CUDA's libraries, colon separated,
#                                    searched before the ones found automatically
#   FASTPATH_GPU_CHECK_BUDGET_S      total time budget in seconds (default 450)
#   FASTPATH_GPU_CHECK_MIN_GAIN      batching gain goal (default 8.2)
#   FASTPATH_GPU_CHECK_MAX_P99_MS    p99 goal at c=32 in ms (default 40)
#   FASTPATH_GPU_CHECK_MIN_EFFICIENCY  efficiency goal (default 0.90)
#   FASTPATH_GPU_CHECK_QUEUE_DELAY_US  ResNet-50's max_queue_delay_microseconds (default 0,
#                                    as generated)
#   FASTPATH_GPU_CHECK_CUDA_OPTIONS  CUDA EP options for ResNet-50, "key=value,..." (default
#                                    none: ORT's defaults), e.g.
#                                    cudnn_conv_algo_search=HEURISTIC
#   FASTPATH_GPU_CHECK_KEEP=1        keep the work folder (models, logs) and print its path
set -euo pipefail

started=$SECONDS
budget="${FASTPATH_GPU_CHECK_BUDGET_S:-450}"
deadline=$((started + budget))
script_dir="$(cd "$(dirname "$0")" && pwd)"
bundle="$(cd "${FASTPATH_BUNDLE:-$script_dir/../..}" && pwd)"
share="$bundle/share/fastpath"
fastpath="$bundle/bin/fastpath"
report_dir="${OUT:-${1:-./gpu-check-report}}"
min_gain="${FASTPATH_GPU_CHECK_MIN_GAIN:-8.2}"
max_p99_ms="${FASTPATH_GPU_CHECK_MAX_P99_MS:-40}"
min_efficiency="${FASTPATH_GPU_CHECK_MIN_EFFICIENCY:-0.90}"
queue_delay_us="${FASTPATH_GPU_CHECK_QUEUE_DELAY_US:-0}"
cuda_options="${FASTPATH_GPU_CHECK_CUDA_OPTIONS:-}"
model=resnet50  # checks 2, 3, 4 and 8 (generate_models.py's ResNet-50, moved to KIND_GPU)
mem_limit=268435456  # 256 MiB: check 6's gpu_mem_limit; its large request needs 1 GiB

mkdir -p "$report_dir"
report_dir="$(cd "$report_dir" && pwd)"
report="$report_dir/report.md"
work="$(mktemp -d "${TMPDIR:-/tmp}/fastpath-gpu-check.XXXXXX")"
models="$work/models"

names=("" "doctor --require-gpu" "KIND_GPU admission (production)"
       "no visible device refused (CUDA_VISIBLE_DEVICES=)" "IO binding staged path"
       "BYTES output on a GPU instance" "gpu_mem_limit" "FP16 accuracy guard"
       "ResNet-50 bench" "TensorRT" "forced out of memory on the GPU" "GPU telemetry over NVML")
results=()
header=()
fail_fast=""
not_run_reason="the check stopped before it"
server_pid=""
server_name=""
server_rc=""
http_url=""

note() { header+=("$*"); }
record() {  # record N LINE: check N's report line
  results[$1]="$2"
  printf '%s\n' "$2"
}
# tmo N: N seconds, or what is left of the budget less 15 s for the report, if smaller.
tmo() {
  local left=$((deadline - SECONDS - 15))
  if ((left < 1)); then left=1; fi
  if ((left < $1)); then echo "$left"; else echo "$1"; fi
}
fits() { ((deadline - SECONDS - 15 >= $1)); }  # whether N seconds of the budget are left

write_report() {
  local n line passed=1 files file
  {
    echo "# fastpath GPU check"
    echo
    for line in "${header[@]}"; do echo "- $line"; done
    echo "- total time: $((SECONDS - started)) s (budget ${budget} s)"
    echo
    echo "## Checks"
    echo
    if [[ -n "$fail_fast" ]]; then
      echo "- ${results[1]}"
      echo
      echo "$fail_fast"
    else
      for n in 1 2 3 4 5 6 7 8 9 10 11; do
        line="${results[$n]:-FAIL ${names[$n]}: not run ($not_run_reason)}"
        echo "- $line"
        [[ "$line" == PASS* || "$line" == SKIP* ]] || passed=0
      done
      echo
      if ((passed)); then echo "All checks passed."; else echo "At least one check FAILED."; fi
    fi
    echo
    files=""
    for file in "$report_dir"/*; do files+="${file##*/} "; done
    echo "Files: ${files% }"
  } >"$report"
  ((passed))
}

stop_server() {  # SIGTERM (then SIGKILL after 10 s) the running server; its log to serve.log
  [[ -n "$server_pid" ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 40); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  server_rc=0
  wait "$server_pid" 2>/dev/null || server_rc=$?
  server_pid=""
  append_log
}

append_log() {
  [[ -f "$work/serve-$server_name.log" ]] || return 0
  {
    echo "==== serve $server_name (exit ${server_rc:-?}) ===="
    cat "$work/serve-$server_name.log"
    echo
  } >>"$report_dir/serve.log"
  rm -f "$work/serve-$server_name.log"
}

finish() {
  local rc=$?
  trap - EXIT
  set +e
  stop_server
  if [[ -n "${resnet_pid:-}" ]]; then kill "$resnet_pid" 2>/dev/null; fi  # still generating
  if [[ -n "${trace_pid:-}" ]]; then kill "$trace_pid" 2>/dev/null; fi  # still recording
  if ((rc != 0 && rc != 130)) && [[ -z "$fail_fast" ]]; then
    not_run_reason="gpu-check.sh stopped early, exit $rc; see its stderr"
  fi
  if [[ -z "${results[1]:-}" ]]; then
    fail_fast="The check stopped before doctor ran (exit $rc)."
    results[1]="FAIL ${names[1]}: not run"
  fi
  local passed=0
  write_report && passed=1
  if [[ "${FASTPATH_GPU_CHECK_KEEP:-0}" == 1 ]]; then
    echo "work folder kept: $work"
  else
    rm -rf "$work"
  fi
  echo "report: $report ($((SECONDS - started)) s)"
  if [[ -n "$fail_fast" ]]; then
    if ((rc == 0)); then rc=1; fi
    exit "$rc"
  fi
  ((passed)) && exit 0
  exit 1
}
trap finish EXIT
trap 'not_run_reason="interrupted"; exit 130' INT TERM

# ---- Python: the one for models and the helper ----
py=""
for candidate in "${FASTPATH_GPU_CHECK_PYTHON:-}" python3 /usr/bin/python3; do
  if [[ -z "$candidate" ]] || ! command -v "$candidate" >/dev/null; then continue; fi
  if "$candidate" -c 'import onnx, numpy' >/dev/null 2>&1; then py="$candidate"; break; fi
  [[ -n "$py" ]] || py="$candidate"  # without onnx: the helper still runs, models fail
done
if [[ -z "$py" ]]; then
  fail_fast="No python3 on this machine: the check needs python3 with onnx and numpy."
  results[1]="FAIL ${names[1]}: not run (no python3)"
  exit 1
fi

# The helper: HTTP without curl, the check models, and each check's verdict line.
cat >"$work/gpucheck.py" <<'PY'
import glob, json, os, re, site, sys, sysconfig, time, urllib.error, urllib.request


def http(method, url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except Exception as e:  # connection refused, reset, timeout: the server is in trouble
        return 0, f"{type(e).__name__}: {e}"


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def short(text, n=300):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def verdict(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {short(detail, 900)}")


def log_response(path, check, status, body, ms):
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"check": check, "status": status, "ms": round(ms, 1),
                            "body": body[:4000]}) + "\n")


def infer(url, model, body, log, check):
    start = time.monotonic()
    status, text = http("POST", f"{url}/v2/models/{model}/infer", body, timeout=120)
    ms = (time.monotonic() - start) * 1000
    log_response(log, check, status, text, ms)
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    return status, doc, text, ms


def outputs_by_name(doc):
    return {o.get("name"): o for o in (doc or {}).get("outputs", [])}


def model_admission(admission, model):
    for m in admission.get("models", []):
        if m.get("name") == model:
            return m
    return None


def placement_summary(m):
    instances = ((m or {}).get("placement") or {}).get("instances") or []
    return "; ".join(i.get("summary", "?") for i in instances) or "no placement audit"


def why(log_path):
    """The reason serve gave for refusing to start: the lines after 'refusing to serve:'."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
    except OSError:
        return "no log"
    for i, l in enumerate(lines):
        if "refusing to serve" in l:
            return short(" ".join(x.strip() for x in lines[i + 1 : i + 4]), 600)
    return short(" | ".join(lines[-3:]), 600) if lines else "empty log"


# ---- commands ----

def cmd_code(url):
    print(http("GET", url, timeout=5)[0])


def cmd_get(url, out):
    status, body = http("GET", url, timeout=30)
    if status != 200:
        sys.exit(1)
    with open(out, "w", encoding="utf-8") as f:
        f.write(body)


def cmd_why(log_path):
    print(why(log_path))


def cmd_bundle_info(path):
    b = load(path)
    keys = ("version", "commit", "cuda_archs", "onnxruntime")
    print(", ".join(f"{k} {b.get(k) if b.get(k) not in (None, '', []) else '(none)'}" for k in keys))


def cmd_cuda_dirs():
    """Folders with CUDA's shared libraries in this Python's nvidia/* wheels."""
    roots = []
    try:
        import nvidia  # a namespace package: one folder per installed nvidia-* wheel family
        roots += [str(p) for p in nvidia.__path__]
    except Exception:
        pass
    candidates = []
    try:
        candidates += site.getsitepackages()
    except Exception:
        pass
    try:
        candidates.append(site.getusersitepackages())
    except Exception:
        pass
    for key in ("purelib", "platlib"):
        if sysconfig.get_paths().get(key):
            candidates.append(sysconfig.get_paths()[key])
    roots += [os.path.join(c, "nvidia") for c in candidates]
    seen = set()
    for root in roots:
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
            real = os.path.realpath(lib)
            if real not in seen and glob.glob(os.path.join(real, "*.so*")):
                seen.add(real)
                print(real)


def cmd_doctor(path, rc, bundle, stderr_path):
    rc = int(rc)
    name = "doctor --require-gpu"
    try:
        d = load(path)
    except Exception as e:
        err = ""
        try:
            err = open(stderr_path, encoding="utf-8", errors="replace").read()
        except OSError:
            pass
        return verdict(False, name, f"exit {rc}, no JSON snapshot ({e}) {short(err)}")
    driver = d.get("driver") or {}
    nvml = d.get("nvml") or {}
    devices = driver.get("devices") or []
    eps = ((d.get("onnxruntime") or {}).get("execution_providers")) or []
    cuda_ep = next((e for e in eps if e.get("provider") == "cuda"), None)
    if rc == 0 and devices and nvml.get("driver_version"):
        g = devices[0]
        ep = (f"CUDA EP registered, {len(cuda_ep.get('devices') or [])} device(s)" if cuda_ep
              else "no CUDA EP entry")
        libs = ", ".join(f"{l['name']} {l.get('version') or '?'}" for l in d.get("libraries", [])
                         if l.get("found"))
        return verdict(True, name,
                       f"exit 0; GPU 0 {g.get('name')}, compute capability "
                       f"{g.get('compute_capability')}, {g.get('total_memory_bytes', 0) / 2**30:.0f} GiB"
                       f" ({len(devices)} device(s)); driver {nvml.get('driver_version')} (CUDA "
                       f"{driver.get('cuda_version')}); {ep}; libraries: {libs}")
    findings = d.get("findings") or []
    if findings:
        first = findings[0]
        detail = f"exit {rc} ({first.get('class')}): {first.get('message')}"
        if len(findings) > 1:
            detail += " [also: " + ", ".join(f.get("class", "?") for f in findings[1:]) + "]"
    elif rc == 0:
        detail = ("exit 0 but the snapshot does not name " +
                  ("the GPU" if not devices else "the driver version (NVML)"))
    else:
        detail = f"exit {rc} without a finding"
    if not os.path.exists(os.path.join(bundle, "lib", "libonnxruntime_providers_cuda.so")):
        detail += ("; and this bundle has no lib/libonnxruntime_providers_cuda.so: it is a CPU "
                   "bundle (tools/bundle.sh --cuda-arch 90 makes a GPU one)")
    verdict(False, name, detail)


def cmd_tensorrt(path):
    d = load(path)
    eps = ((d.get("onnxruntime") or {}).get("execution_providers")) or []
    trt = next((e for e in eps if e.get("provider") == "tensorrt"), None)
    lib = next((l for l in d.get("libraries", []) if l.get("name") == "tensorrt"), {})
    nvinfer = (f"libnvinfer {lib.get('version') or '?'} at {lib.get('path')}" if lib.get("found")
               else f"no libnvinfer ({lib.get('error') or 'not probed'})")
    if trt is None:
        return verdict(False, "TensorRT", "doctor --json names no tensorrt execution provider; "
                       + nvinfer)
    if trt.get("registered") and not trt.get("error") and trt.get("devices"):
        print(f"PASS TensorRT: available: the tensorrt EP registered with "
              f"{len(trt['devices'])} device(s); {nvinfer}")
    else:
        reason = trt.get("error") or "registered, but it enumerated no device"
        print(f"SKIP TensorRT: unavailable: {short(reason, 500)}; {nvinfer}")


def cmd_gpu_config(config_path, queue_delay_us, cuda_options=""):
    """The generated ResNet-50 config, moved to KIND_GPU on the cuda accelerator, with the
    cuda options given as "key=value,key=value"."""
    text = open(config_path, encoding="utf-8").read()
    if "kind: KIND_CPU" not in text:
        sys.exit(f"{config_path}: no 'kind: KIND_CPU' to replace")
    text = text.replace("kind: KIND_CPU", "kind: KIND_GPU")
    text = re.sub(r"max_queue_delay_microseconds: \d+",
                  f"max_queue_delay_microseconds: {int(queue_delay_us)}", text)
    params = "".join(f' parameters {{ key: "{k.strip()}" value: "{v.strip()}" }}'
                     for k, v in (kv.split("=", 1) for kv in cuda_options.split(",") if kv))
    text += ('optimization { execution_accelerators { gpu_execution_accelerator '
             f'[ {{ name: "cuda"{params} }} ] }} }}\n')
    open(config_path, "w", encoding="utf-8").write(text)


# The check models. Triton-layout repositories, one per check, so that one refused model
# does not take the others' checks with it.

def tensors(kind, entries):
    return f"{kind} [\n" + ",\n".join(
        f'  {{ name: "{n}" data_type: {t} dims: [ {", ".join(map(str, dims))} ] }}'
        for n, t, dims in entries) + "\n]\n"


def gpu_config(name, max_batch, inputs, outputs, cuda_params=None, params=None):
    cuda = "".join(f' parameters {{ key: "{k}" value: "{v}" }}'
                   for k, v in (cuda_params or {}).items())
    extra = "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n'
                    for k, v in (params or {}).items())
    return (f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: {max_batch}\n'
            + tensors("input", inputs) + tensors("output", outputs)
            + "instance_group [ { kind: KIND_GPU count: 1 } ]\n"
            + f'optimization {{ execution_accelerators {{ gpu_execution_accelerator '
              f'[ {{ name: "cuda"{cuda} }} ] }} }}\n' + extra)


def write_model(repo, name, model_bytes, config, extra_files=None):
    version = os.path.join(repo, name, "1")
    os.makedirs(version, exist_ok=True)
    with open(os.path.join(version, "model.onnx"), "wb") as f:
        f.write(model_bytes)
    for file_name, data in (extra_files or {}).items():
        with open(os.path.join(version, file_name), "wb") as f:
            f.write(data)
    with open(os.path.join(repo, name, "config.pbtxt"), "w", encoding="utf-8") as f:
        f.write(config)


MEM_LIMIT = os.environ.get("GPU_CHECK_MEM_LIMIT", "268435456")  # check 6's gpu_mem_limit, bytes
OOM_LIMIT = "16Mi"        # check 10's parameters fastpath.memory.limit_bytes
OOM_ELEMENTS = 2**23      # check 10's large request: [1, 8388608] FP32, 32 MiB in and out
BYTES_W = [[1, 2], [3, 4], [5, 6], [7, 8]]
BYTES_B = [1, -1]


def cmd_make_models(root, flat):
    import onnx
    from onnx import TensorProto, helper

    def finish(graph):
        model = helper.make_model(graph, producer_name="fastpath-gpu-check",
                                  opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model.SerializeToString()

    # 5. BYTES output: Y = X W + B on CUDA (a Gemm after ORT's fusion), then
    # LABEL = string(int64(Y)), the Cast to STRING on the CPU (CUDA has no string kernel).
    # make_test_models.py's identity_bytes cannot serve here: its only node, an Identity
    # on strings, has no CUDA kernel, so nothing would run on the GPU and the placement
    # policy would refuse it as the silent CPU fallback.
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["H"], name="fc"),
         helper.make_node("Add", ["H", "B"], ["Y"], name="bias"),
         helper.make_node("Cast", ["Y"], ["YI"], name="to_int64", to=TensorProto.INT64),
         helper.make_node("Cast", ["YI"], ["LABEL"], name="to_string", to=TensorProto.STRING)],
        "gpu_bytes",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 2]),
         helper.make_tensor_value_info("LABEL", TensorProto.STRING, ["batch", 2])],
        [helper.make_tensor("W", TensorProto.FLOAT, [4, 2], sum(BYTES_W, [])),
         helper.make_tensor("B", TensorProto.FLOAT, [2], BYTES_B)])
    write_model(os.path.join(root, "bytes"), "gpu_bytes", finish(graph),
                gpu_config("gpu_bytes", 8, [("X", "TYPE_FP32", [4])],
                           [("Y", "TYPE_FP32", [2]), ("LABEL", "TYPE_STRING", [2])]))

    # 6. gpu_mem_limit: Y = ReduceSum(Tile(X, R)); R picks the size of the intermediate on
    # the GPU (16 * R[0] * R[1] floats) while the request and the answer stay tiny.
    graph = helper.make_graph(
        [helper.make_node("Tile", ["X", "R"], ["T"], name="tile"),
         helper.make_node("ReduceSum", ["T", "AXES"], ["Y"], name="sum", keepdims=1)],
        "gpu_mem_limit",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 16]),
         helper.make_tensor_value_info("R", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor("AXES", TensorProto.INT64, [2], [0, 1])])
    write_model(os.path.join(root, "memlimit"), "gpu_mem_limit", finish(graph),
                gpu_config("gpu_mem_limit", 0,
                           [("X", "TYPE_FP32", [1, 16]), ("R", "TYPE_INT64", [2])],
                           [("Y", "TYPE_FP32", [1, 1])],
                           cuda_params={"gpu_mem_limit": MEM_LIMIT}))

    # 7. The FP16 accuracy guard's pair from make_test_models.py: fp16_add (X + 0.1 in
    # FP16) with fp32_add beside it as its reference; the fastpath.slo budget gives the
    # guard its seeded inputs.
    with open(os.path.join(flat, "fp16_add.onnx"), "rb") as f:
        fp16 = f.read()
    with open(os.path.join(flat, "fp32_add.onnx"), "rb") as f:
        fp32 = f.read()
    write_model(os.path.join(root, "fp16"), "fp16_add", fp16,
                gpu_config("fp16_add", 8, [("X", "TYPE_FP32", [16])], [("Y", "TYPE_FP32", [16])],
                           params={"fastpath.accuracy.reference_model": "model_fp32.onnx",
                                   "fastpath.accuracy.tolerance": "1e-3",
                                   "fastpath.slo.p95_ms": "1000",
                                   "fastpath.slo.batch_size": "1",
                                   "fastpath.slo.iterations": "5",
                                   "fastpath.slo.seed": "1"}),
                {"model_fp32.onnx": fp32})

    # 10. A forced out of memory: add_one (OUTPUT0 = INPUT0 + 1) with its arena capped by
    # fastpath.memory.limit_bytes (the CUDA EP's gpu_mem_limit underneath). No model_warmup,
    # so its dynamic dim leaves the budget unmeasured at load and the large request really
    # runs on the GPU and runs out there (503), rather than being refused up front (413).
    with open(os.path.join(flat, "add_one.onnx"), "rb") as f:
        add_one = f.read()
    write_model(os.path.join(root, "oom"), "gpu_oom", add_one,
                gpu_config("gpu_oom", 8, [("INPUT0", "TYPE_FP32", [-1])],
                           [("OUTPUT0", "TYPE_FP32", [-1])],
                           params={"fastpath.memory.limit_bytes": OOM_LIMIT}))


def cmd_admitted(admission_path, model):
    name = "KIND_GPU admission (production)"
    admission = load(admission_path)
    m = model_admission(admission, model)
    if m is None:
        return verdict(False, name, f"/v2/health/admission lists no model '{model}'")
    instances = (m.get("placement") or {}).get("instances") or []
    problems = []
    if m.get("state") != "READY":
        problems.append(f"state {m.get('state')}: {'; '.join(m.get('reasons') or [])}")
    if admission.get("profile") != "production":
        problems.append(f"profile {admission.get('profile')}")
    if not instances:
        problems.append("no placement audit")
    for i, inst in enumerate(instances):
        cuda = sum(p.get("compute_nodes", 0) for p in inst.get("providers", [])
                   if p.get("provider") == "CUDAExecutionProvider")
        elsewhere = {p.get("provider"): p.get("compute_nodes", 0) for p in inst.get("providers", [])
                     if p.get("provider") != "CUDAExecutionProvider" and p.get("compute_nodes", 0)}
        if cuda == 0:
            problems.append(f"instance {i}: no compute node on CUDAExecutionProvider")
        if elsewhere:
            problems.append(f"instance {i}: compute nodes elsewhere: {elsewhere}")
        if inst.get("degraded_reason"):
            problems.append(f"instance {i}: degraded: {inst['degraded_reason']}")
    detail = (f"{model} {m.get('state')} under --profile {admission.get('profile')}; placement: "
              f"{placement_summary(m)}")
    verdict(not problems, name, detail + ("" if not problems else "; " + "; ".join(problems)))


def cmd_refused(log_path, rc):
    rc = int(rc)
    name = "no visible device refused (CUDA_VISIBLE_DEVICES=)"
    reason = why(log_path)
    text = open(log_path, encoding="utf-8", errors="replace").read() if os.path.exists(log_path) else ""
    ok = rc == 23 and "refusing to serve" in text
    verdict(ok, name, f"serve --profile production exited {rc} (want 23): {reason}")


def staged_runs(admission, model, field="staged_runs"):
    """Staged (IO-binding) runs per instance of `model`, from /v2/health/admission's
    models[].placement.instances[].<field>; None when fastpath does not expose the count.
    This is the one place that knows where the count lives."""
    m = model_admission(admission, model)
    instances = ((m or {}).get("placement") or {}).get("instances") or []
    counts = [inst.get(field) for inst in instances]
    if not instances or any(not isinstance(c, int) for c in counts):
        return None
    return counts


def model_stats(stats):
    executions = inferences = 0
    for s in stats.get("model_stats", []):
        executions += int(s.get("execution_count", 0))
        inferences += int(s.get("inference_count", 0))
    return executions, inferences


def cmd_staged(admission_path, stats_path, model, field):
    name = "IO binding staged path"
    admission = load(admission_path)
    executions, inferences = model_stats(load(stats_path))
    counts = staged_runs(admission, model, field)
    seen = f"{model}'s statistics: {executions} executions, {inferences} inferences"
    if counts is None:
        return verdict(False, name,
                       f"no staged-run count exposed (looked for models[].placement.instances[]."
                       f"{field} in GET /v2/health/admission); {seen}")
    instances = ((model_admission(admission, model) or {}).get("placement") or {}).get("instances")
    direct = [i for i, inst in enumerate(instances) if inst.get("staged") is False]
    total = sum(counts)
    ok = total > 0 and total >= executions and not direct
    detail = f"staged runs per instance {counts} (total {total}) for {seen}"
    if direct:
        detail += f"; instances {direct} run the direct path"
    verdict(ok, name, detail)


def cmd_bytes(url, log):
    name = "BYTES output on a GPU instance"
    rows = [[1, 2, 3, 4], [0, 1, 0, 1], [-2, 5, 0, 3]]
    want_y = [[sum(r[k] * BYTES_W[k][j] for k in range(4)) + BYTES_B[j] for j in range(2)]
              for r in rows]
    want_label = [str(int(v)) for row in want_y for v in row]
    body = {"inputs": [{"name": "X", "shape": [len(rows), 4], "datatype": "FP32",
                        "data": sum(rows, [])}]}
    status, doc, text, ms = infer(url, "gpu_bytes", body, log, "bytes")
    _, adm_text = http("GET", f"{url}/v2/health/admission")
    try:
        placement = placement_summary(model_admission(json.loads(adm_text), "gpu_bytes"))
    except ValueError:
        placement = "admission unreadable"
    out = outputs_by_name(doc)
    label, y = out.get("LABEL", {}), out.get("Y", {})
    problems = []
    if status != 200:
        problems.append(f"HTTP {status}: {short(text)}")
    else:
        if label.get("datatype") != "BYTES" or label.get("data") != want_label:
            problems.append(f"LABEL is {label.get('datatype')} {json.dumps(label.get('data'))}, "
                            f"want BYTES {json.dumps(want_label)}")
        if [float(v) for v in y.get("data", [])] != [float(v) for row in want_y for v in row]:
            problems.append(f"Y is {y.get('data')}, want {sum(want_y, [])}")
        if label.get("shape") != [len(rows), 2]:
            problems.append(f"LABEL shape {label.get('shape')}, want {[len(rows), 2]}")
    detail = (f"gpu_bytes (X W + B, then Cast to STRING) answered HTTP {status} in {ms:.1f} ms, "
              f"LABEL {json.dumps(label.get('data'))}; placement: {placement}")
    verdict(not problems, name, detail + ("" if not problems else "; " + "; ".join(problems)))


def cmd_memlimit(url, pid, log):
    name = "gpu_mem_limit"
    limit = int(MEM_LIMIT)
    adm_status, adm_text = http("GET", f"{url}/v2/health/admission")
    try:
        m = model_admission(json.loads(adm_text), "gpu_mem_limit")
    except ValueError:
        m = None
    small = {"inputs": [{"name": "X", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
                        {"name": "R", "shape": [2], "datatype": "INT64", "data": [1, 4]}]}
    repeats = 2**24  # 16 * 2^24 floats = 1 GiB on the GPU, 4x the limit
    big = {"inputs": [{"name": "X", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16},
                      {"name": "R", "shape": [2], "datatype": "INT64", "data": [1, repeats]}]}

    def y_of(doc):
        return (outputs_by_name(doc).get("Y") or {}).get("data")

    s1, d1, t1, _ = infer(url, "gpu_mem_limit", small, log, "gpu_mem_limit small")
    s2, d2, t2, ms2 = infer(url, "gpu_mem_limit", big, log, "gpu_mem_limit 1 GiB")
    s3, d3, t3, ms3 = infer(url, "gpu_mem_limit", small, log, "gpu_mem_limit small after")
    ready, _ = http("GET", f"{url}/v2/health/ready")
    try:
        os.kill(int(pid), 0)
        alive = True
    except OSError:
        alive = False
    problems = []
    if m is None or m.get("state") != "READY":
        problems.append(f"model not READY: {m and m.get('reasons')}")
    if s1 != 200 or y_of(d1) != [64.0]:
        problems.append(f"first small request: HTTP {s1} {short(t1, 200)}")
    clean = 400 <= s2 < 600 and isinstance(d2, dict) and isinstance(d2.get("error"), str)
    if s2 == 200:
        problems.append(f"the 1 GiB request succeeded (Y {y_of(d2)}): the limit of {limit} bytes "
                        "was not enforced")
    elif not clean:
        problems.append(f"the 1 GiB request got no clean error: HTTP {s2} {short(t2, 200)}")
    if s3 != 200 or y_of(d3) != [64.0]:
        problems.append(f"the next small request: HTTP {s3} {short(t3, 200)}")
    if not alive or ready != 200:
        problems.append(f"server alive {alive}, /v2/health/ready {ready}")
    error = (d2 or {}).get("error", t2) if isinstance(d2, dict) else t2
    detail = (f"gpu_mem_limit {limit} ({limit / 2**20:.0f} MiB) accepted (model "
              f"{m and m.get('state')}, placement {placement_summary(m)}); a request needing "
              f"1 GiB on the GPU got HTTP {s2} in {ms2:.0f} ms: {short(error, 260)}; the next "
              f"request HTTP {s3} (Y {y_of(d3)}) in {ms3:.1f} ms; server alive {alive}, ready {ready}")
    verdict(not problems, name, detail + ("" if not problems else "; " + "; ".join(problems)))


def post_text(url, text, timeout=120):
    """POST a JSON text as it is: (status, Retry-After header or None, body)."""
    request = urllib.request.Request(url, data=text.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.headers.get("Retry-After"), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Retry-After"), e.read().decode("utf-8", "replace")
    except Exception as e:  # connection refused, reset, timeout: the server is in trouble
        return 0, None, f"{type(e).__name__}: {e}"


def cmd_oom(url, pid, log):
    name = "forced out of memory on the GPU"
    model = "gpu_oom"

    def admission_of():
        _, text = http("GET", f"{url}/v2/health/admission")
        try:
            return model_admission(json.loads(text), model)
        except ValueError:
            return None

    def memory_of(m):
        instances = ((m or {}).get("placement") or {}).get("instances") or []
        return [inst.get("memory") for inst in instances]

    xs = [i / 4.0 for i in range(16)]
    small = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": xs}]}
    want = [x + 1 for x in xs]

    def output_of(doc):
        return (outputs_by_name(doc).get("OUTPUT0") or {}).get("data")

    m = admission_of()
    s1, d1, t1, _ = infer(url, model, small, log, "oom small")
    # Compact JSON, every element 1: 16 MiB of body for 32 MiB of FP32, under the HTTP limit.
    big = ('{"inputs":[{"name":"INPUT0","shape":[1,%d],"datatype":"FP32","data":[' % OOM_ELEMENTS
           + "1," * (OOM_ELEMENTS - 1) + "1]}]}")
    start = time.monotonic()
    s2, retry_after, t2 = post_text(f"{url}/v2/models/{model}/infer", big)
    ms2 = (time.monotonic() - start) * 1000
    log_response(log, "oom 32 MiB", s2, t2, ms2)
    s3, d3, t3, ms3 = infer(url, model, small, log, "oom small after")
    ready, _ = http("GET", f"{url}/v2/health/ready")
    try:
        os.kill(int(pid), 0)
        alive = True
    except OSError:
        alive = False
    after = admission_of()
    try:
        d2 = json.loads(t2)
    except ValueError:
        d2 = None
    error = d2.get("error") if isinstance(d2, dict) else None
    problems = []
    if m is None or m.get("state") != "READY":
        problems.append(f"model not READY: {m and m.get('reasons')}")
    if s1 != 200 or output_of(d1) != want:
        problems.append(f"first small request: HTTP {s1} {short(t1, 200)}")
    if s2 == 200:
        problems.append(f"the 32 MiB request succeeded: the limit of {OOM_LIMIT} was not enforced")
    elif s2 not in (503, 413) or not isinstance(error, str):
        problems.append(f"the 32 MiB request got no clean out-of-memory error: HTTP {s2} "
                        f"{short(t2, 200)}")
    elif not error.startswith("out of memory"):
        problems.append(f"the error does not start with 'out of memory': {short(error, 200)}")
    elif s2 == 503 and retry_after != "1":
        problems.append(f"HTTP 503 with Retry-After {retry_after!r}, want '1'")
    if s3 != 200 or output_of(d3) != want:
        problems.append(f"the next small request: HTTP {s3} {short(t3, 200)}")
    if not alive or ready != 200:
        problems.append(f"server alive {alive}, /v2/health/ready {ready}")
    how = {503: "ran out on the GPU", 413: "refused before it ran"}.get(s2, "")
    detail = (f"{model} (add_one) on KIND_GPU, fastpath.memory.limit_bytes {OOM_LIMIT} (model "
              f"{m and m.get('state')}, placement {placement_summary(m)}); a [1, {OOM_ELEMENTS}] "
              f"FP32 request got HTTP {s2}{' (' + how + ')' if how else ''}"
              f"{', Retry-After ' + retry_after if retry_after else ''} in {ms2:.0f} ms: "
              f"{short(error if error is not None else t2, 260)}; the next small request HTTP "
              f"{s3} in {ms3:.1f} ms; server alive {alive}, ready {ready}; arena after: "
              f"{short(json.dumps(memory_of(after)), 300)}")
    verdict(not problems, name, detail + ("" if not problems else "; " + "; ".join(problems)))


def cmd_fp16(url, log_path, log):
    name = "FP16 accuracy guard"
    text = open(log_path, encoding="utf-8", errors="replace").read()
    agreed = [l.strip() for l in text.splitlines() if "agrees with its FP32 reference" in l]
    _, adm_text = http("GET", f"{url}/v2/health/admission")
    try:
        m = model_admission(json.loads(adm_text), "fp16_add")
    except ValueError:
        m = None
    xs = [(i * 37 % 64) / 64.0 + 1 / 128.0 for i in range(32)]  # in (0, 1)
    body = {"inputs": [{"name": "X", "shape": [2, 16], "datatype": "FP32", "data": xs}]}
    status, doc, body_text, ms = infer(url, "fp16_add", body, log, "fp16_add")
    ys = (outputs_by_name(doc).get("Y") or {}).get("data") or []
    worst = max((abs(y - (x + 0.1)) for x, y in zip(xs, ys)), default=None)
    problems = []
    if m is None or m.get("state") != "READY":
        problems.append(f"model not READY: {m and m.get('reasons')}")
    if not agreed:
        problems.append("the log has no 'agrees with its FP32 reference' line: the guard did not run")
    if status != 200 or len(ys) != len(xs):
        problems.append(f"request: HTTP {status} {short(body_text, 200)}")
    elif worst is None or worst > 1e-3:
        problems.append(f"a request's outputs differ from X + 0.1 by {worst}")
    detail = (f"fp16_add READY in production with reference model_fp32.onnx, tolerance 1e-3 "
              f"(log: {short(agreed[0].replace('fastpath: ', ''), 200) if agreed else 'none'}); "
              f"placement {placement_summary(m)}; a 2x16 request's worst |Y - (X + 0.1)| "
              f"{worst if worst is None else f'{worst:.2e}'}")
    verdict(not problems, name, detail + ("" if not problems else "; " + "; ".join(problems)))


def tail_of(path, n=2):
    try:
        lines = [l for l in open(path, encoding="utf-8", errors="replace") if l.strip()]
    except OSError:
        return "no log"
    return short(" | ".join(lines[-n:]), 400)


def cmd_bench(bench_path, bench_rc, bench_log, inproc_rc, inproc_log, min_gain, max_p99_ms,
              min_eff):
    name = "ResNet-50 bench"
    min_gain, max_p99_ms, min_eff = float(min_gain), float(max_p99_ms), float(min_eff)
    try:
        runs = load(bench_path)["runs"]
    except Exception:
        runs = []
    server = [p for r in runs for p in r.get("points", []) if p.get("mode") == "concurrency"]
    inproc = [p for r in runs for p in r.get("in_process", []) if p.get("requests", 0) > 0]
    points = {p["concurrency"]: p for p in server}
    parts = []  # the figures, each with its goal
    ok = True
    if points:
        parts.append("throughput " + ", ".join(
            f"c={c} {points[c]['throughput_ips']:.0f}" for c in sorted(points)) + " inf/s")
        # Each GPU's average utilization over the point's windows (bench --collect-metrics).
        busy = []
        for c in sorted(points):
            gpus = (points[c].get("gpu_metrics") or {}).get("gpus") or []
            figs = [g["utilization_avg"] for g in gpus
                    if isinstance(g.get("utilization_avg"), (int, float))]
            if figs:
                busy.append(f"c={c} " + "/".join(f"{u:.2f}" for u in figs))
        if busy:
            parts.append("GPU utilization " + ", ".join(busy))
        errors = sum(p.get("errors", 0) for p in server)
        if errors:
            samples = {}
            for p in server:
                samples.update(p.get("error_samples") or {})
            parts.append(f"{errors} errors ({short(samples, 200)})")
            ok = False
    if 1 in points and 32 in points and points[1]["throughput_ips"] > 0:
        gain = points[32]["throughput_ips"] / points[1]["throughput_ips"]
        batch = (points[32].get("server") or {}).get("average_batch", 0)
        met = gain >= min_gain
        ok = ok and met
        parts.append(f"batching gain {gain:.2f}x (c=32 over c=1, average server batch "
                     f"{batch:.1f}; goal >= {min_gain:g}x: {'ok' if met else 'MISS'})")
        p99 = points[32]["latency_us"]["p99"] / 1000
        met = p99 <= max_p99_ms
        ok = ok and met
        parts.append(f"p99 at c=32 {p99:.1f} ms (goal <= {max_p99_ms:g} ms: {'ok' if met else 'MISS'})")
    else:
        ok = False
        parts.append(f"the server sweep did not measure c=1 and c=32 (measured {sorted(points)}; "
                     f"bench exit {bench_rc}: {tail_of(bench_log)})")
    if inproc and server:
        best_server = max(server, key=lambda p: p["throughput_ips"])
        best_in = max(inproc, key=lambda p: p["throughput_ips"])
        eff = best_server["throughput_ips"] / best_in["throughput_ips"]
        met = eff >= min_eff
        ok = ok and met
        parts.append(f"efficiency {eff:.2f} (server best {best_server['throughput_ips']:.0f} inf/s "
                     f"at c={best_server['concurrency']} over in-process ORT CUDA best "
                     f"{best_in['throughput_ips']:.0f} inf/s at batch {best_in['batch_size']}; "
                     f"goal >= {min_eff:.2f}: {'ok' if met else 'MISS'})")
    elif not inproc:
        ok = False
        parts.append(f"efficiency: in-process ORT CUDA did not run (exit {inproc_rc}): "
                     f"{tail_of(inproc_log)}")
    else:
        ok = False
        parts.append("efficiency: no server point to compare with the in-process ceiling")
    verdict(ok, name, "; ".join(parts))


def prometheus_samples(text):
    """[(name, {label: value}, value)] of a /metrics page."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)", line)
        if not m or line.startswith("#"):
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return out


def cmd_telemetry(url, metrics_url, doctor_path, serve_log, smi_path, trace_path, trace_rc,
                  trace_log):
    """11: the server's GPU telemetry over NVML (/v2/health/admission's gpu_telemetry and the
    fastpath_gpu_* series of /metrics) is live for the GPU doctor named, and
    doctor --record-gpu-trace records it."""
    name = "GPU telemetry over NVML"
    status, text = http("GET", f"{url}/v2/health/admission")
    try:
        telemetry = json.loads(text).get("gpu_telemetry")
    except (ValueError, AttributeError):
        return verdict(False, name, f"/v2/health/admission: HTTP {status} {short(text, 200)}")
    if not telemetry:
        off = ""
        try:
            off = next((l.split("GPU telemetry off: ", 1)[1].strip()
                        for l in open(serve_log, encoding="utf-8", errors="replace")
                        if "GPU telemetry off: " in l), "")
        except OSError:
            pass
        return verdict(False, name, "not live: /v2/health/admission's gpu_telemetry is null; "
                       + (f"serve's log: GPU telemetry off: {off}" if off
                          else "serve's log gives no reason"))
    source = telemetry.get("source") or ""
    gpus = telemetry.get("gpus") or []
    problems = []
    if not source.startswith("NVML"):
        problems.append(f"the source is {source!r}, not NVML")
    # The GPU doctor named: its index, name and total memory (doctor has no UUID, nvidia-smi
    # links one to a name).
    d = load(doctor_path)
    named = {dev.get("ordinal"): dev for dev in (d.get("driver") or {}).get("devices") or []}
    smi = {}
    try:
        for row in open(smi_path, encoding="utf-8", errors="replace"):
            cells = [c.strip() for c in row.split(",")]
            if len(cells) >= 3 and cells[1].startswith(("GPU-", "MIG-")):
                smi[cells[1]] = cells[2]
    except OSError:
        pass
    g, doc_dev, match = None, None, "no sampled GPU is one doctor named"
    for cand in gpus:
        dev = named.get(cand.get("gpu"))
        if dev is None:
            continue
        total, cuda_total = cand.get("memory_total_bytes"), dev.get("total_memory_bytes")
        if total and cuda_total and abs(total - cuda_total) > 0.05 * cuda_total:
            match = (f"GPU {cand.get('gpu')}'s memory total {total / 2**30:.1f} GiB is not "
                     f"doctor's {dev.get('name')}'s {cuda_total / 2**30:.1f} GiB")
            continue
        if smi and smi.get(cand.get("uuid")) != dev.get("name"):
            match = (f"nvidia-smi names GPU {cand.get('gpu')}'s UUID {cand.get('uuid')} "
                     f"{smi.get(cand.get('uuid'), 'nowhere')}, doctor {dev.get('name')}")
            continue
        g, doc_dev = cand, dev
        break
    if g is None:
        return verdict(False, name, f"{source}; {len(gpus)} GPU(s) sampled "
                       f"{[(x.get('gpu'), x.get('uuid')) for x in gpus]}: {match}")
    index, uuid = g.get("gpu"), g.get("uuid") or ""
    parts = [f"{source}: GPU {index} {uuid} is doctor's GPU {index} {doc_dev.get('name')} "
             f"(index, memory total{', UUID by nvidia-smi' if smi else '; no nvidia-smi for the UUID'})"]
    # Live: the GPU watch samples it again (every 1000 ms unless --gpu-sample-interval-ms).
    time.sleep(2.2)
    _, text2 = http("GET", f"{url}/v2/health/admission")
    try:
        again = next((x for x in (json.loads(text2).get("gpu_telemetry") or {}).get("gpus") or []
                      if x.get("gpu") == index), {})
    except (ValueError, AttributeError):
        again = {}
    t1, t2 = g.get("sampled_at_ms"), again.get("sampled_at_ms")
    if not (isinstance(t1, int) and isinstance(t2, int) and t2 > t1):
        problems.append(f"not sampled again in 2.2 s (sampled_at_ms {t1} then {t2})")
    parts.append(f"sampled at {t1} then {t2} ms")
    if g.get("quarantined") or again.get("quarantined"):
        problems.append(f"quarantined: {g.get('quarantined') or again.get('quarantined')}")

    # /metrics: the fastpath_gpu_* series of that GPU.
    m_status, m_text = http("GET", metrics_url, timeout=30)
    mine = [(n, l, v) for n, l, v in prometheus_samples(m_text) if n.startswith("fastpath_gpu_")
            and l.get("gpu") == str(index) and l.get("uuid") == uuid]
    one = {n: v for n, l, v in mine if "reason" not in l and "policy" not in l and "xid" not in l}

    def fig(metric, scale=1, digits=0):
        return f"{one[metric] / scale:.{digits}f}" if metric in one else "n/a"

    if m_status != 200:
        problems.append(f"GET /metrics: HTTP {m_status} {short(m_text, 200)}")
    elif not mine:
        problems.append(f"/metrics has no fastpath_gpu_* sample labelled gpu=\"{index}\" uuid=\"{uuid}\"")
    else:
        used = one.get("fastpath_gpu_memory_used_bytes", 0)
        if used <= 0:
            problems.append("fastpath_gpu_memory_used_bytes is not > 0 with ResNet-50 loaded")
        active = [l["reason"] for n, l, v in mine if n == "fastpath_gpu_clocks_event_active" and v]
        throttled = {l["reason"]: round(v, 1) for n, l, v in mine
                     if n == "fastpath_gpu_throttle_seconds_total"}
        xids = {l["xid"]: int(v) for n, l, v in mine if n == "fastpath_gpu_xid_total"}
        if one.get("fastpath_gpu_quarantined"):
            problems.append("fastpath_gpu_quarantined is 1")
        parts.append(
            f"/metrics: {len(mine)} fastpath_gpu_* samples for it: utilization "
            f"{fig('fastpath_gpu_utilization_ratio', 1, 2)}, memory used "
            f"{fig('fastpath_gpu_memory_used_bytes', 2**30, 2)} of "
            f"{fig('fastpath_gpu_memory_total_bytes', 2**30, 1)} GiB, "
            f"{fig('fastpath_gpu_temperature_celsius')} C, power "
            f"{fig('fastpath_gpu_power_watts')} of {fig('fastpath_gpu_power_limit_watts')} W, "
            f"SM clock {fig('fastpath_gpu_sm_clock_mhz')} MHz, clock-event reasons "
            f"{', '.join(active) or 'none'} (throttled s {throttled or 'none'}), ECC uncorrected "
            f"{fig('fastpath_gpu_ecc_uncorrected_total')}, remapped rows "
            f"{fig('fastpath_gpu_remapped_rows_uncorrectable')}, XIDs {xids or 'none'}")

    # The trace doctor --record-gpu-trace wrote while the sweep of 8 ran ("" when it did not).
    samples = []
    try:
        for line in open(trace_path, encoding="utf-8"):
            s = json.loads(line)
            if s.get("gpu", 0) == index:
                samples.append(s)
    except (OSError, ValueError, AttributeError):
        pass
    times = sorted({s.get("t_ms", 0) for s in samples})
    utils = [s["utilization_ratio"] for s in samples
             if isinstance(s.get("utilization_ratio"), (int, float))]
    powers = [s["power_w"] for s in samples if isinstance(s.get("power_w"), (int, float))]
    other = sorted({s["uuid"] for s in samples if s.get("uuid") and s["uuid"] != uuid})
    if trace_rc == "":
        problems.append("doctor --record-gpu-trace did not run (no time left for the sweep)")
    elif len(times) < 2:
        problems.append(f"doctor --record-gpu-trace exit {trace_rc}, {len(times)} sample(s) of "
                        f"GPU {index}: {tail_of(trace_log)}")
    else:
        parts.append(f"doctor --record-gpu-trace during the sweep (exit {trace_rc}): "
                     f"{len(times)} samples over "
                     f"{(times[-1] - times[0]) / 1000:.1f} s, utilization max "
                     f"{max(utils) if utils else 'n/a'} mean "
                     f"{sum(utils) / len(utils) if utils else float('nan'):.2f}, power max "
                     f"{max(powers) if powers else float('nan'):.0f} W")
        if other:
            problems.append(f"the trace's GPU {index} is {other}, not {uuid}")
        if not (utils and max(utils) > 0):
            problems.append("the trace shows no GPU utilization while the sweep ran")
    verdict(not problems, name, "; ".join(parts) + ("" if not problems else "; " + "; ".join(problems)))


if __name__ == "__main__":
    command, args = sys.argv[1].replace("-", "_"), sys.argv[2:]
    globals()["cmd_" + command](*args)
PY
helper() { "$py" "$work/gpucheck.py" "$@"; }
# evaluate N HELPER-ARGS...: runs one verdict command of the helper and records its line.
evaluate() {
  local n="$1" out
  shift
  out="$(GPU_CHECK_MEM_LIMIT="$mem_limit" timeout "$(tmo 240)" "$py" "$work/gpucheck.py" "$@" \
         2>>"$work/helper.err" | tail -n 1)" || true
  if [[ "$out" =~ ^(PASS|FAIL|SKIP)\  ]]; then
    record "$n" "$out"
  else
    record "$n" "FAIL ${names[$n]}: the evaluation failed: $(tail -n 1 "$work/helper.err" 2>/dev/null)"
  fi
}

# ---- the header ----
note "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host $(uname -sr), $(nproc) CPUs"
bundle_info="no share/fastpath/bundle.json"
if [[ -f "$share/bundle.json" ]]; then
  bundle_info="$(helper bundle-info "$share/bundle.json" 2>/dev/null || echo "unreadable bundle.json")"
fi
note "bundle: $bundle ($bundle_info)"
if command -v nvidia-smi >/dev/null; then
  note "nvidia-smi: $(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
      --format=csv,noheader 2>&1 | head -1 || true)"
else
  note "nvidia-smi: not on PATH"
fi
note "python: $(command -v "$py") ($("$py" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null); $("$py" -c 'import onnx, numpy; print("onnx", onnx.__version__, "numpy", numpy.__version__)' 2>/dev/null || echo 'no onnx/numpy: the model checks will fail'))"

# ---- CUDA's runtime libraries: the host's, never the bundle's ----
# They are prepended to LD_LIBRARY_PATH of the fastpath processes only. The bundle's own
# libraries (ONNX Runtime, gRPC, ...) come from its RUNPATH, $ORIGIN/../lib; these folders
# hold nvidia's libraries and nothing the bundle carries.
cuda_dirs=()
add_dir() {
  local d="$1" have
  [[ -d "$d" ]] || return 0
  d="$(cd "$d" && pwd -P)"
  compgen -G "$d/*.so*" >/dev/null || return 0
  for have in "${cuda_dirs[@]}"; do [[ "$have" == "$d" ]] && return 0; done
  cuda_dirs+=("$d")
}
IFS=: read -r -a extra_dirs <<<"${FASTPATH_GPU_CHECK_CUDA_LIBS:-}"
for d in "${extra_dirs[@]}"; do [[ -n "$d" ]] && add_dir "$d"; done
for candidate in "$py" python3 /usr/bin/python3; do
  command -v "$candidate" >/dev/null || continue
  while IFS= read -r d; do add_dir "$d"; done < <(timeout 20 "$candidate" "$work/gpucheck.py" cuda-dirs 2>/dev/null || true)
done
shopt -s nullglob
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         /usr/local/lib/python3*/dist-packages/nvidia/*/lib /usr/lib/python3/dist-packages/nvidia/*/lib \
         /opt/conda/lib/python3*/site-packages/nvidia/*/lib "$HOME"/.local/lib/python3*/site-packages/nvidia/*/lib; do
  add_dir "$d"
done
shopt -u nullglob
fp_ld_path="$(IFS=:; echo "${cuda_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
found=()
for soname in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcufft.so.12 libcudnn.so.9; do
  where="not in these folders"
  for d in "${cuda_dirs[@]}"; do
    if [[ -e "$d/$soname" ]]; then where="$d"; break; fi
  done
  found+=("$soname: $where")
done
if ((${#cuda_dirs[@]})); then
  note "CUDA runtime libraries (the host's, prepended to LD_LIBRARY_PATH for fastpath): ${cuda_dirs[*]}"
else
  note "CUDA runtime libraries: no folder found (python nvidia/*/lib, /usr/local/cuda/lib64); the system loader path only"
fi
note "sonames: $(printf '%s; ' "${found[@]}" | sed 's/; $//')"

# ---- 1. doctor --require-gpu ----
if [[ ! -x "$fastpath" ]]; then
  record 1 "FAIL ${names[1]}: no fastpath binary at $fastpath (FASTPATH_BUNDLE names the bundle root)"
  fail_fast="No fastpath binary: nothing else was run."
  exit 1
fi
note "fastpath: $("$fastpath" version 2>&1 | head -1)"
doctor_rc=0
timeout "$(tmo 90)" env LD_LIBRARY_PATH="$fp_ld_path" "$fastpath" doctor --json --require-gpu \
  >"$report_dir/doctor.json" 2>"$work/doctor.err" || doctor_rc=$?
evaluate 1 doctor "$report_dir/doctor.json" "$doctor_rc" "$bundle" "$work/doctor.err"
if [[ "${results[1]}" != PASS* ]]; then
  fail_fast="The GPU fast path is not usable on this machine, so the other 10 checks (they all need it) were not run."
  ((doctor_rc != 0)) || doctor_rc=1
  exit "$doctor_rc"
fi
evaluate 9 tensorrt "$report_dir/doctor.json"
not_run_reason="the time budget of ${budget} s ran out"

# ---- the models ----
# ResNet-50 (~100 MB, a few seconds) in the background while the small checks run.
resnet_pid=""
if fits 30; then
  timeout "$(tmo 150)" "$py" "$share/generate_models.py" --out "$models/resnet" --only "$model" \
    >"$work/generate-$model.log" 2>&1 &
  resnet_pid=$!
fi
small_models=0
if timeout "$(tmo 60)" "$py" "$share/make_test_models.py" --out "$work/flat" >"$work/make-test-models.log" 2>&1 &&
   timeout "$(tmo 60)" "$py" "$work/gpucheck.py" make-models "$models" "$work/flat" >>"$work/make-test-models.log" 2>&1; then
  small_models=1
fi
models_failed="the models could not be written: $(tail -n 1 "$work/make-test-models.log" 2>/dev/null)"

# start_server NAME REPO SECONDS [VAR=value ...]: `fastpath serve --profile production` on
# REPO in the background, with the CUDA folders and any VAR=value in its environment. Returns
# 0 once /v2/health/ready answers 200 ($http_url), 1 when serve exited ($server_rc), 2 when
# it was not ready within SECONDS.
start_server() {
  local repo="$2" limit="$3" port="" until
  server_name="$1"
  shift 3
  server_rc=""
  http_url=""
  rm -f "$work/ports-$server_name"
  env LD_LIBRARY_PATH="$fp_ld_path" "$@" "$fastpath" serve --model-repository "$repo" \
    --profile production --host 127.0.0.1 --http-port 0 --grpc-port 0 --metrics-port 0 \
    --grace-period-secs 5 --port-file "$work/ports-$server_name" \
    >"$work/serve-$server_name.log" 2>&1 &
  server_pid=$!
  until=$((SECONDS + limit))
  while ((SECONDS < until)); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      server_rc=0
      wait "$server_pid" || server_rc=$?
      server_pid=""
      return 1
    fi
    if [[ -s "$work/ports-$server_name" ]]; then
      port="$(sed -n 's/.*http=\([0-9]*\).*/\1/p' "$work/ports-$server_name")"
      if [[ -n "$port" && "$(helper code "http://127.0.0.1:$port/v2/health/ready" 2>/dev/null)" == 200 ]]; then
        http_url="http://127.0.0.1:$port"
        return 0
      fi
    fi
    sleep 0.5
  done
  return 2
}

# serve_check N NAME REPO VERDICT-COMMAND: checks 5-7 and 10, each on its own server.
serve_check() {
  local n="$1" name="$2" repo="$3" command="$4" started_rc=0
  if ((!small_models)); then record "$n" "FAIL ${names[$n]}: $models_failed"; return; fi
  if ! fits 20; then return; fi
  start_server "$name" "$repo" "$(tmo 90)" || started_rc=$?
  case "$started_rc" in
    0)
      case "$command" in
        bytes) evaluate "$n" bytes "$http_url" "$report_dir/responses.jsonl" ;;
        memlimit) evaluate "$n" memlimit "$http_url" "$server_pid" "$report_dir/responses.jsonl" ;;
        fp16) evaluate "$n" fp16 "$http_url" "$work/serve-$name.log" "$report_dir/responses.jsonl" ;;
        oom) evaluate "$n" oom "$http_url" "$server_pid" "$report_dir/responses.jsonl" ;;
      esac
      stop_server ;;
    1)
      record "$n" "FAIL ${names[$n]}: serve --profile production refused the model, exit $server_rc: $(helper why "$work/serve-$name.log")"
      append_log ;;
    *)
      record "$n" "FAIL ${names[$n]}: serve was not ready within its time: $(helper why "$work/serve-$name.log")"
      stop_server ;;
  esac
}

# ---- 5, 6, 7, 10: the small models, each on its own server ----
serve_check 5 bytes "$models/bytes" bytes
serve_check 6 memlimit "$models/memlimit" memlimit
serve_check 7 fp16 "$models/fp16" fp16
serve_check 10 oom "$models/oom" oom

# ---- ResNet-50 on KIND_GPU ----
resnet_ok=0
resnet_failed="ResNet-50 could not be generated"
if [[ -n "$resnet_pid" ]]; then
  gen_rc=0
  wait "$resnet_pid" || gen_rc=$?
  resnet_pid=""
  if ((gen_rc == 0)) && helper gpu-config "$models/resnet/$model/config.pbtxt" "$queue_delay_us" "$cuda_options" 2>>"$work/helper.err"; then
    resnet_ok=1
  else
    resnet_failed="ResNet-50 could not be generated (exit $gen_rc): $(tail -n 1 "$work/generate-$model.log" 2>/dev/null)"
  fi
fi
if ((!resnet_ok)); then
  for n in 2 3 4 8 11; do record "$n" "FAIL ${names[$n]}: $resnet_failed"; done
fi

# 3. The same model with no device visible: refused, exit 23.
if ((resnet_ok)) && fits 20; then
  refused_rc=0
  start_server refused "$models/resnet" "$(tmo 90)" CUDA_VISIBLE_DEVICES= || refused_rc=$?
  case "$refused_rc" in
    1) evaluate 3 refused "$work/serve-refused.log" "$server_rc"; append_log ;;
    0) record 3 "FAIL ${names[3]}: serve --profile production started and is READY with no visible device (the silent fallback)"
       stop_server ;;
    *) record 3 "FAIL ${names[3]}: serve neither refused nor became ready in time: $(helper why "$work/serve-refused.log")"
       stop_server ;;
  esac
fi

# 2. Admitted in production; 4. staged runs; 8. the bench sweep; 11. GPU telemetry; all on
# one server.
if ((resnet_ok)) && fits 40; then
  resnet_rc=0
  start_server "$model" "$models/resnet" "$(tmo 180)" || resnet_rc=$?
  if ((resnet_rc == 0)); then
    helper get "$http_url/v2/health/admission" "$work/admission-start.json" || true
    cp "$work/admission-start.json" "$report_dir/admission.json" 2>/dev/null || true
    evaluate 2 admitted "$work/admission-start.json" "$model"
    port="${http_url##*:}"
    # A short load at the sweep's concurrencies for the staged-run count. It also warms the
    # server: each batch size the batcher forms meets cuDNN's algorithm search once (ORT's
    # default is exhaustive), and that should be behind the sweep, not in its windows.
    if fits 20; then
      timeout "$(tmo 45)" env LD_LIBRARY_PATH="$fp_ld_path" "$fastpath" bench -m "$model" \
        -u "127.0.0.1:$port" --concurrency 1,8,16,32 --warmup-ms 0 \
        --measurement-interval-ms 1500 --max-trials 1 -q >"$work/load.log" 2>&1 || true
      if helper get "$http_url/v2/health/admission" "$report_dir/admission.json" &&
         helper get "$http_url/v2/models/$model/stats" "$report_dir/stats.json"; then
        evaluate 4 staged "$report_dir/admission.json" "$report_dir/stats.json" "$model" staged_runs
      else
        record 4 "FAIL ${names[4]}: the server did not answer /v2/health/admission or the statistics after the load"
      fi
    fi
    bench_rc=""
    trace_rc=""
    trace_pid=""
    if fits 60; then
      # 11's GPU trace, recorded by doctor through NVML while the sweep loads the GPU; it
      # stays in the work folder (the report folder is full).
      trace_rc=0
      timeout "$(tmo 30)" env LD_LIBRARY_PATH="$fp_ld_path" "$fastpath" doctor \
        --record-gpu-trace "$work/gpu-trace.jsonl" --seconds 10 --interval-ms 250 \
        >"$work/gpu-trace.log" 2>&1 &
      trace_pid=$!
      # Each point's GPU utilization, power and memory from the server's metrics.
      collect=()
      metrics_port="$(sed -n 's/.*metrics=\([0-9]*\).*/\1/p' "$work/ports-$model" || true)"
      if [[ -n "$metrics_port" ]]; then
        collect=(--collect-metrics --metrics-url "127.0.0.1:$metrics_port" --metrics-interval-ms 250)
      fi
      bench_rc=0
      timeout "$(tmo 150)" env LD_LIBRARY_PATH="$fp_ld_path" "$fastpath" bench -m "$model" \
        -u "127.0.0.1:$port" --concurrency 1,8,16,32 --warmup-ms 1500 \
        --measurement-interval-ms 2000 --max-trials 3 --seed 1 "${collect[@]}" \
        --label "$model KIND_GPU cuda, dynamic batching (http binary)" \
        --json "$report_dir/bench.json" --csv "$report_dir/bench.csv" -q \
        >"$work/bench.log" 2>&1 || bench_rc=$?
      wait "$trace_pid" || trace_rc=$?
      trace_pid=""
      helper get "$http_url/v2/health/admission" "$report_dir/admission.json" || true
      helper get "$http_url/v2/models/$model/stats" "$report_dir/stats.json" || true
    fi
    # 11. GPU telemetry: admission's gpu_telemetry and /metrics' fastpath_gpu_* series for
    # the GPU doctor named (nvidia-smi links its UUID to the name), and the trace.
    if fits 15; then
      metrics_port="$(sed -n 's/.*metrics=\([0-9]*\).*/\1/p' "$work/ports-$model" || true)"
      if command -v nvidia-smi >/dev/null; then
        timeout 20 nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader \
          >"$work/nvidia-smi.csv" 2>&1 || true
      fi
      evaluate 11 telemetry "$http_url" "http://127.0.0.1:$metrics_port/metrics" \
        "$report_dir/doctor.json" "$work/serve-$model.log" "$work/nvidia-smi.csv" \
        "$work/gpu-trace.jsonl" "$trace_rc" "$work/gpu-trace.log"
    fi
    stop_server
    # The ceiling: the same config's instance run in-process on ONNX Runtime (the server is
    # stopped, so the GPU is the ceiling's alone).
    if [[ -n "$bench_rc" ]] && fits 30; then
      inproc_rc=0
      timeout "$(tmo 150)" env LD_LIBRARY_PATH="$fp_ld_path" "$fastpath" bench -m "$model" \
        --in-process --no-server --model-repository "$models/resnet" --batch-sizes 1,8,16,32 \
        --request-pool 8 --warmup-ms 1000 --measurement-interval-ms 2000 --max-trials 3 \
        --seed 1 --label "$model in-process ORT (config's providers: cuda)" \
        --json "$report_dir/bench.json" --csv "$report_dir/bench.csv" --append -q \
        >"$work/inprocess.log" 2>&1 || inproc_rc=$?
      evaluate 8 bench "$report_dir/bench.json" "$bench_rc" "$work/bench.log" "$inproc_rc" \
        "$work/inprocess.log" "$min_gain" "$max_p99_ms" "$min_efficiency"
    fi
  elif ((resnet_rc == 1)); then
    reason="$(helper why "$work/serve-$model.log")"
    for n in 2 4 8 11; do
      record "$n" "FAIL ${names[$n]}: serve --profile production refused $model on KIND_GPU, exit $server_rc: $reason"
    done
    append_log
  else
    for n in 2 4 8 11; do record "$n" "FAIL ${names[$n]}: $model's server was not ready in time"; done
    stop_server
  fi
fi
