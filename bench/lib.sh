# Sourced by the side-by-side scripts (overhead_ab.sh, efficiency_ab.sh, cpu_split.sh): the
# example repository, and `fastpath serve` on free ports. The caller sets ROOT and WORK (a
# scratch directory) and calls stop_servers on exit.
EXAMPLES=$ROOT/build/tests/integration/example_models
[ -d "$EXAMPLES" ] || EXAMPLES=$ROOT/models/example
SERVERS=()

# pinned CPUS COMMAND...: COMMAND on the CPUs CPUS (a taskset list, e.g. 0 or 2-7), or
# unpinned when CPUS is empty. SERVER_CPUS pins the servers start_server starts (and what the
# scripts compare them with, such as the in-process ceiling); CLIENT_CPUS pins the load
# generators, so that on a machine with cores to spare the client does not take the server's.
pinned() {
  local cpus=$1
  shift
  if [ -n "$cpus" ]; then
    taskset -c "$cpus" "$@"
  else
    "$@"
  fi
}

# start_server NAME BINARY [SERVE ARGS...]: BINARY serves the examples (with any further
# `serve` arguments), on SERVER_CPUS when set; its ports go to $WORK/NAME.port and its log to
# $WORK/NAME.log. Returns once the ports are known (within START_SECONDS, 30 by default); its
# pid is ${SERVERS[-1]}.
start_server() {
  local pin=()  # not `pinned`: a function in the background would make $! its subshell's
  [ -n "${SERVER_CPUS:-}" ] && pin=(taskset -c "$SERVER_CPUS")
  "${pin[@]}" "$2" serve --model-repository "$EXAMPLES" --host 127.0.0.1 --http-port 0 --grpc-port 0 \
    --metrics-port 0 --port-file "$WORK/$1.port" "${@:3}" > "$WORK/$1.log" 2>&1 &
  SERVERS+=($!)
  for _ in $(seq $((${START_SECONDS:-30} * 10))); do
    [ -s "$WORK/$1.port" ] && return 0
    sleep 0.1
  done
  echo "fastpath serve ($1) did not start; its log:" >&2
  cat "$WORK/$1.log" >&2
  return 1
}

# server_port NAME http|grpc
server_port() {
  grep -o "$2=[0-9]*" "$WORK/$1.port" | cut -d= -f2
}

stop_servers() {
  kill "${SERVERS[@]}" 2> /dev/null || true
}

# outside_load NAME MODEL http|grpc CONCURRENCY SECONDS: loads server NAME with an outside,
# event-driven load generator on one thread, as a user would measure fastpath: wrk over HTTP
# (Triton's binary tensor extension), h2load over gRPC (one stream per connection), each
# connection sending the same request (bench/outside_requests.py) in a closed loop after a
# second's warm-up, on CLIENT_CPUS when set. HTTP_CLIENT=h2load loads HTTP with h2load too (over
# HTTP/1.1), so that both transports are measured by one client.
# Prints "INFER_PER_S CLIENT_CPU_US_PER_REQUEST P50_US P99_US" (the latencies as the client saw
# them: wrk's distribution, h2load's log of each request). Fails on an HTTP error (wrk), and when
# the server's statistics count more failures than the requests a client can leave in flight
# when it stops (CONCURRENCY per client process: the server counts those as failed, their
# connection gone), which is how a gRPC error shows (h2load sees its 200).
# Installs wrk and h2load when missing (tools/setup.sh --bench).
outside_load() {
  local name=$1 model=$2 transport=$3 c=$4 seconds=$5 http port ok0 fail0 ok fail out user sys rate timed in_flight
  http=http://127.0.0.1:$(server_port "$name" http)
  port=$(server_port "$name" "$transport")
  outside_requests "$name" "$model"
  read -r ok0 fail0 < <(model_counts "$http" "$model")
  out=$WORK/outside/client.out
  local TIMEFORMAT='%U %S' client=h2load target
  [ "$transport" = http ] && [ "${HTTP_CLIENT:-wrk}" = wrk ] && client=wrk
  if [ "$client" = wrk ]; then
    cat > "$WORK/outside/post.lua" <<LUA
local f = assert(io.open("$WORK/outside/$model.http", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "$(cat "$WORK/outside/$model.json_length")"
LUA
    local url=$http/v2/models/$model/infer
    pinned "${CLIENT_CPUS:-}" wrk -t 1 -c "$c" -d 1s -s "$WORK/outside/post.lua" "$url" > /dev/null
    { time pinned "${CLIENT_CPUS:-}" wrk -t 1 -c "$c" -d "${seconds}s" --latency -s "$WORK/outside/post.lua" "$url" > "$out"; } 2> "$out.cpu"
    if grep -q 'Non-2xx' "$out"; then echo "wrk: $(grep 'Non-2xx' "$out")" >&2; return 1; fi
    rate=$(awk '/^Requests\/sec:/ {print $2}' "$out")
    timed=$seconds    # the warm-up was another process
    in_flight=$((2 * c))
  else
    target=(-d "$WORK/outside/$model.grpc" -H 'content-type: application/grpc' -H 'te: trailers'
      "http://127.0.0.1:$port/inference.GRPCInferenceService/ModelInfer")
    [ "$transport" = http ] && target=(--h1 -d "$WORK/outside/$model.http"
      -H 'Content-Type: application/octet-stream'
      -H "Inference-Header-Content-Length: $(cat "$WORK/outside/$model.json_length")"
      "$http/v2/models/$model/infer")
    { time pinned "${CLIENT_CPUS:-}" h2load -t 1 -c "$c" -m 1 --warm-up-time=1 -D "$seconds" \
        --log-file "$out.log" "${target[@]}" > "$out"; } 2> "$out.cpu"
    rate=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$out")
    timed=$((seconds + 1))  # its warm-up included, at about the same rate
    in_flight=$c
  fi
  read -r ok fail < <(model_counts "$http" "$model")
  if ((fail - fail0 > in_flight || ok == ok0)) || [ -z "$rate" ]; then
    echo "outside_load: $((ok - ok0)) successes, $((fail - fail0)) failures; the client said:" >&2
    cat "$out" >&2
    return 1
  fi
  read -r user sys < "$out.cpu"
  python3 - "$client" "$out" "$rate" "$user" "$sys" "$timed" << 'PY'
import sys
client, out = sys.argv[1:3]
rate, user, system, timed = map(float, sys.argv[3:])
if client == "wrk":  # wrk --latency: "50%  61.00us", in us, ms or s
    scale = {"us": 1, "ms": 1e3, "s": 1e6}
    dist = {}
    for line in open(out):
        f = line.split()
        if len(f) == 2 and f[0] in ("50%", "99%"):
            number = f[1].rstrip("usm")
            dist[f[0]] = float(number) * scale[f[1][len(number):]]
    p50, p99 = dist["50%"], dist["99%"]
else:  # h2load --log-file: start time, status, duration in us, a line per request
    durations = sorted(float(line.split()[2]) for line in open(out + ".log"))
    p50, p99 = (durations[min(len(durations) - 1, int(q * len(durations)))] for q in (0.5, 0.99))
print(f"{rate:.1f} {(user + system) * 1e6 / (rate * timed):.1f} {p50:.1f} {p99:.1f}")
PY
}

# h2load_count NAME MODEL http|grpc CONCURRENCY COUNT: COUNT requests to server NAME from h2load
# (the request files of outside_requests, which must have run), in a closed loop; fails unless
# every one succeeded (over gRPC: as h2load sees it, the HTTP/2 status).
h2load_count() {
  local port
  port=$(server_port "$1" "$3")
  if [ "$3" = grpc ]; then
    h2load -t 1 -c "$4" -m 1 -n "$5" -d "$WORK/outside/$2.grpc" \
      -H 'content-type: application/grpc' -H 'te: trailers' \
      "http://127.0.0.1:$port/inference.GRPCInferenceService/ModelInfer"
  else
    h2load -t 1 -c "$4" -m 1 -n "$5" -d "$WORK/outside/$2.http" --h1 \
      -H 'Content-Type: application/octet-stream' \
      -H "Inference-Header-Content-Length: $(cat "$WORK/outside/$2.json_length")" \
      "http://127.0.0.1:$port/v2/models/$2/infer"
  fi | grep -q " $5 succeeded" || { echo "h2load_count: $1 did not answer $5 $2 requests" >&2; return 1; }
}

# outside_requests NAME MODEL: the request files outside_load sends to server NAME, written
# once into $WORK/outside; and wrk and h2load, installed when missing.
outside_requests() {
  if ! command -v wrk > /dev/null || ! command -v h2load > /dev/null; then
    "$ROOT/tools/setup.sh" --bench > /dev/null
  fi
  [ -s "$WORK/outside/$2.http" ] && return 0
  mkdir -p "$WORK/outside"
  python3 "$ROOT/bench/outside_requests.py" "http://127.0.0.1:$(server_port "$1" http)" "$2" "$WORK/outside"
  mv "$WORK/outside/http.body" "$WORK/outside/$2.http"
  mv "$WORK/outside/http.json_length" "$WORK/outside/$2.json_length"
  mv "$WORK/outside/grpc.body" "$WORK/outside/$2.grpc"
}

# model_counts HTTP_URL MODEL: "SUCCESSES FAILURES" from the model's statistics.
model_counts() {
  python3 -c 'import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1]))["model_stats"][0]["inference_stats"]
print(s["success"]["count"], s["fail"]["count"])' "$1/v2/models/$2/stats"
}

# A model's inferences and executions so far (their ratio over a run: the average batch):
# model_executions URL MODEL.
model_executions() {
  python3 -c 'import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1]))["model_stats"][0]
print(s["inference_count"], s["execution_count"])' "$1/v2/models/$2/stats"
}
