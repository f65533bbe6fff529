#!/usr/bin/env bash
# Installs what fastpath needs on Debian 12 (bookworm), then fetches ONNX Runtime 1.29.0.
# Idempotent and fast on the second run: apt runs only when a package is missing (checked with
# dpkg-query), so a machine that has everything needs no network for this step. Runs apt as
# root, or through sudo when not root.
#
# --test (tools/test.sh) also installs what only the test suite needs: clang and its
# libFuzzer runtime for the fuzz targets, and Debian's prometheus package for promtool (the
# lint of a scrape and the alert rules' unit tests).
#
# --bench also installs the outside load generators some bench/ scripts drive: wrk (HTTP) and
# h2load (nghttp2-client; gRPC), and libnghttp2-dev for bench/grpc_ab's nghttp2 style (found
# at configure time). Neither the build nor the tests need them.
#
# Environment:
#   ONNXRUNTIME_ROOT  use this ONNX Runtime install (include/ and lib/) instead of fetching one;
#                     npm is then not needed either.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates openssl
  python3 python3-onnx python3-numpy
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-dev rapidjson-dev libgtest-dev libgmock-dev prometheus-cpp-dev libssl-dev
  libsimdjson-dev  # the HTTP codec's JSON fast path (src/frontend/http/infer_codec.cc)
  libjemalloc-dev  # the fastpath executable's malloc (CMakeLists.txt, FASTPATH_ALLOCATOR)
  libcli11-dev libspdlog-dev  # the command line (header-only); the logger (brings libfmt-dev)
  libyaml-cpp-dev  # fastpath preflight: the Prometheus rule file (src/cli/rules_yaml.cc)
  patchelf zstd  # tools/bundle.sh: RPATHs of the bundled libraries, the packed tarball
)
case "${1:-}" in
  --test) packages+=(clang libclang-rt-14-dev prometheus python3-yaml) ;;  # python3-yaml: tests/kubernetes
  --bench) packages+=(wrk nghttp2-client libnghttp2-dev) ;;
esac
# npm fetches ONNX Runtime (`npm pack`). An npm that is already there (NodeSource, nvm, ...) is
# used as is: Debian's nodejs/npm packages would conflict with it.
if [[ -z "${ONNXRUNTIME_ROOT:-}" ]] && ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == installed ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} Debian packages are installed"
else
  echo "setup: installing ${missing[*]}"
  as_root=()
  if [[ $EUID -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "setup: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    as_root=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [[ -n "${ONNXRUNTIME_ROOT:-}" ]]; then
  echo "setup: using ONNX Runtime from ONNXRUNTIME_ROOT=$ONNXRUNTIME_ROOT"
  [[ -f "$ONNXRUNTIME_ROOT/include/onnxruntime_cxx_api.h" ]] || {
    echo "setup: $ONNXRUNTIME_ROOT/include/onnxruntime_cxx_api.h is missing" >&2
    exit 1
  }
else
  "$root/tools/fetch_onnxruntime.sh"
fi
