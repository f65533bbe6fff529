#!/usr/bin/env bash
# README command two (and .ci/run): installs what is missing, builds and runs the whole test
# suite twice: the RelWithDebInfo tree in build/ (preset dev), then an ASan+UBSan tree in
# build-asan/ (preset asan). Exits non-zero on any failure and prints the time of each phase.
# The tests write the example models they need into the build tree themselves.
# Lean enough for CI's 2-core, 90-minute budget: Ninja, one build per tree, nothing else.
# Environment: FASTPATH_JOBS (build parallelism, default: all cores), FASTPATH_TEST_JOBS
# (ctest parallelism, default 2), FASTPATH_CMAKE_ARGS (extra configure arguments),
# FASTPATH_SKIP_ASAN=1 (the dev tree only, for a quick local run).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/common.sh
source tools/common.sh
test_jobs="${FASTPATH_TEST_JOBS:-2}"

phase setup tools/setup.sh
phase "configure dev" cmake --preset dev "${fastpath_cmake_args[@]}"
phase "build dev" cmake --build --preset dev -j "$fastpath_jobs"
phase "test dev" ctest --preset dev -j "$test_jobs"

if [[ "${FASTPATH_SKIP_ASAN:-0}" != 1 ]]; then
  # The asan presets set ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS (with tools/lsan.supp)
  # for the build too, because gtest_discover_tests runs the test binaries at build time.
  phase "configure asan" cmake --preset asan "${fastpath_cmake_args[@]}"
  phase "build asan" cmake --build --preset asan -j "$fastpath_jobs"
  phase "test asan" ctest --preset asan -j "$test_jobs"
fi
phase_summary
echo "test: all passed"
