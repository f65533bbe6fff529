#!/usr/bin/env bash
# README command one: installs what is missing, builds fastpath (Release, build-release/),
# writes the example models into models/example and serves them on Triton's default ports
# (HTTP 8000, gRPC 8001, metrics 8002). Arguments are passed on to `fastpath serve`, e.g.
#   tools/run.sh --http-port 9000 --model-control-mode explicit
# Environment: FASTPATH_WITH_RESNET50=1 also writes resnet50 (~100 MB, for GPU runs);
# FASTPATH_CMAKE_ARGS adds configure arguments; FASTPATH_JOBS sets the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/common.sh
source tools/common.sh

model_args=(--out models/example)
[[ "${FASTPATH_WITH_RESNET50:-0}" == 1 ]] && model_args+=(--with-resnet50)

phase setup tools/setup.sh
phase configure cmake --preset release "${fastpath_cmake_args[@]}"
phase build cmake --build --preset release -j "$fastpath_jobs"
phase models python3 tools/generate_models.py "${model_args[@]}"
phase_summary

serve_args=(serve)
# The example repository unless the caller names another one.
if [[ " $* " != *" --model-repository"* ]]; then
  serve_args+=(--model-repository models/example)
fi
printf '\n==> fastpath %s\n' "${serve_args[*]} $*"
exec build-release/src/cli/fastpath "${serve_args[@]}" "$@"
