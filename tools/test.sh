#!/usr/bin/env bash
# README command two (and .ci/run): installs what is missing, builds and runs the whole test
# suite twice: the RelWithDebInfo tree in build/ (preset dev), then an ASan+UBSan tree in
# build-asan/ (preset asan); then the scheduler, server and HTTP front-end tests under
# ThreadSanitizer (build-tsan/, preset tsan), and each libFuzzer target (config.pbtxt, the
# HTTP and the gRPC inference codecs) for FASTPATH_FUZZ_SECONDS from its committed seed
# corpus (build-fuzz/, preset fuzz, clang). Exits non-zero on any failure (a fuzzer's crash
# included) and prints the time of each phase.
# The tests write the example models they need into the build tree themselves.
# Lean enough for CI's 2-core, 90-minute budget: Ninja, one build per tree, nothing else.
# Environment: FASTPATH_JOBS (build parallelism, default: all cores), FASTPATH_TEST_JOBS
# (ctest parallelism, default 2), FASTPATH_CMAKE_ARGS (extra configure arguments),
# FASTPATH_SKIP_ASAN=1 (the dev tree only, for a quick local run; it skips TSan and fuzzing
# too), FASTPATH_FUZZ_SECONDS (each fuzz target's run, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/common.sh
source tools/common.sh
test_jobs="${FASTPATH_TEST_JOBS:-2}"

phase setup tools/setup.sh --test
phase "configure dev" cmake --preset dev "${fastpath_cmake_args[@]}"
phase "build dev" cmake --build --preset dev -j "$fastpath_jobs"
phase "test dev" ctest --preset dev -j "$test_jobs"

if [[ "${FASTPATH_SKIP_ASAN:-0}" != 1 ]]; then
  # The asan presets set ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS (with tools/lsan.supp)
  # for the build too, because gtest_discover_tests runs the test binaries at build time.
  phase "configure asan" cmake --preset asan "${fastpath_cmake_args[@]}"
  phase "build asan" cmake --build --preset asan -j "$fastpath_jobs"
  phase "test asan" ctest --preset asan -j "$test_jobs"

  # The threads that matter most to TSan: the batcher and instance pool, the ensemble
  # scheduler (and its steps' versions held across an unload), the facade and its model-control pool (and its canary thread's rollout watch),
  # and the HTTP front end's event loops.
  # Not the gRPC front end: Debian's gRPC and abseil are not built with TSan, so the
  # synchronization inside its callback API is invisible to it and every gRPC test reports
  # races in gRPC's own code (epoll, abseil's GraphCycles, Call::PerformOps at shutdown);
  # it needs an instrumented gRPC.
  tsan_targets=(scheduler_test ensemble_scheduler_test ensemble_unload_test server_test
                control_pool_test http_frontend_test gpu_watch_test drift_watch_test canary_test
                rollout_canary_test)
  phase "configure tsan" cmake --preset tsan "${fastpath_cmake_args[@]}"
  phase "build tsan" cmake --build --preset tsan -j "$fastpath_jobs" --target "${tsan_targets[@]}"
  # Only the targets built above have tests; -L unit leaves out the placeholders of the rest.
  phase "test tsan" ctest --preset tsan -j "$test_jobs" -L unit -E "^Grpc"

  phase "configure fuzz" cmake --preset fuzz -DFASTPATH_FUZZ_SECONDS="${FASTPATH_FUZZ_SECONDS:-60}" \
    "${fastpath_cmake_args[@]}"
  phase "build fuzz" cmake --build build-fuzz -j "$fastpath_jobs" \
    --target config_fuzz http_codec_fuzz grpc_codec_fuzz
  phase "fuzz" ctest --test-dir build-fuzz -L fuzz --output-on-failure
fi
phase_summary
echo "test: all passed"
