#!/usr/bin/env bash
# Runs `promtool "$@"` for ctest (tests/prometheus/CMakeLists.txt). promtool comes with Debian's
# `prometheus` package, which the test command installs (tools/setup.sh --test): where it is
# missing, the test fails and says so rather than passing without having checked anything.
set -euo pipefail
if ! command -v promtool >/dev/null; then
  echo "promtool is not installed: it comes with Debian's 'prometheus' package, which" \
    "tools/setup.sh --test (the test command, tools/test.sh) installs" >&2
  exit 1
fi
exec promtool "$@"
