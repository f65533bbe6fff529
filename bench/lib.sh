# Sourced by the side-by-side scripts (overhead_ab.sh, efficiency_ab.sh, cpu_split.sh): the
# example repository, and `fastpath serve` on free ports. The caller sets ROOT and WORK (a
# scratch directory) and calls stop_servers on exit.
EXAMPLES=$ROOT/build/tests/integration/example_models
[ -d "$EXAMPLES" ] || EXAMPLES=$ROOT/models/example
SERVERS=()

# start_server NAME BINARY: BINARY serves the examples; its ports go to $WORK/NAME.port and its
# log to $WORK/NAME.log. Returns once the ports are known; its pid is ${SERVERS[-1]}.
start_server() {
  "$2" serve --model-repository "$EXAMPLES" --host 127.0.0.1 --http-port 0 --grpc-port 0 \
    --metrics-port 0 --port-file "$WORK/$1.port" > "$WORK/$1.log" 2>&1 &
  SERVERS+=($!)
  for _ in $(seq 300); do
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
