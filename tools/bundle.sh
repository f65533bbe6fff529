#!/usr/bin/env bash
# Builds fastpath (Release) and writes a relocatable runtime bundle: a folder that runs on a
# bare Debian 12 or Ubuntu 24.04 with nothing installed but the C/C++ runtime and glibc, and
# the same folder packed for shipping.
#
#   tools/bundle.sh [--cuda-arch LIST] [--format zst|xz] [--from-build DIR] [--no-pack] OUT
#
#   OUT/fastpath/bin/fastpath            RPATH $ORIGIN/../lib, never LD_LIBRARY_PATH
#   OUT/fastpath/lib/                    every shared library fastpath needs beyond the base
#                                        system: ONNX Runtime, gRPC, protobuf, abseil,
#                                        OpenSSL, c-ares, re2, prometheus-cpp, spdlog,
#                                        fmt, yaml-cpp, simdjson, jemalloc, zlib
#   OUT/fastpath/share/fastpath/         generate_models.py, make_test_models.py,
#                                        gpu-check.sh, cpu-efficiency.sh, bundle.json
#                                        (what is inside),
#                                        prometheus/fastpath-rules.yaml (the alert rules
#                                        `fastpath preflight` checks by default)
#   OUT/fastpath-<version>-linux-x64[-cuda-<archs>].tar.zst
#
# --format xz packs .tar.xz instead (xz -9e: a little smaller, and slower): Python's tarfile
# unpacks it with no other tool, for hosts without zstd such as the GPU machine's image.
# --cuda-arch 90 (a comma-separated list of SM architectures: 90 for H100/H200) adds ONNX
# Runtime's CUDA execution provider with only the device code those architectures need
# (tools/prune_fatbin.py). CUDA's own runtime libraries (cudart, cuBLAS, cuDNN, cuRAND) are
# not carried: on a GPU node they come from the host or the image, and `fastpath doctor`
# names any that are missing. Without --cuda-arch the bundle is CPU-only.
# --from-build DIR bundles the binary DIR/src/cli/fastpath as it is instead of building
# (the test suite bundles its own build this way); --no-pack skips the tarball.
#
# Size budgets of the packed tarball, checked here: CPU bundle <= 32 MiB, CUDA bundle
# <= 60 MiB (it must fit the 64 MiB a GPU machine accepts per call, with a few files beside).
# Needs: the build dependencies (tools/setup.sh), patchelf, zstd, python3, readelf.
# Environment: FASTPATH_COMMIT (the commit for bundle.json where there is no .git),
# FASTPATH_CMAKE_ARGS and FASTPATH_JOBS (tools/common.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
cuda_archs=""
from_build=""
pack=1
format=zst
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cuda-arch) cuda_archs="${2:?--cuda-arch needs a list such as 90}"; shift 2 ;;
    --cuda-arch=*) cuda_archs="${1#*=}"; shift ;;
    --from-build) from_build="${2:?--from-build needs a build folder}"; shift 2 ;;
    --no-pack) pack=0; shift ;;
    --format) format="${2:-}"; shift 2 ;;
    --format=*) format="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "bundle: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [[ -z "$out" ]] || { echo "bundle: one OUT folder only" >&2; exit 2; }; out="$1"; shift ;;
  esac
done
[[ -n "$out" ]] || { usage >&2; exit 2; }
[[ "$format" == zst || "$format" == xz ]] || {
  echo "bundle: --format is zst or xz, not '$format'" >&2
  exit 2
}
if [[ -n "$cuda_archs" && ! "$cuda_archs" =~ ^[0-9]+(,[0-9]+)*$ ]]; then
  echo "bundle: --cuda-arch takes SM numbers such as 90 or 80,90, not '$cuda_archs'" >&2
  exit 2
fi
for tool in patchelf "$( [[ $format == xz ]] && echo xz || echo zstd)" readelf python3; do
  command -v "$tool" >/dev/null || {
    echo "bundle: $tool is missing (tools/setup.sh installs it)" >&2
    exit 1
  }
done

if [[ -n "$from_build" ]]; then
  binary="$from_build/src/cli/fastpath"
else
  # shellcheck source=tools/common.sh
  source "$root/tools/common.sh"
  cmake --preset release -S "$root" "${fastpath_cmake_args[@]}" >/dev/null
  cmake --build --preset release --target fastpath -j "$fastpath_jobs"
  binary="$root/build-release/src/cli/fastpath"
fi
[[ -x "$binary" ]] || { echo "bundle: no fastpath binary at $binary" >&2; exit 1; }

# The ONNX Runtime fastpath was built against: where its libonnxruntime.so.1 resolves.
ort_lib="$(ldd "$binary" | awk '$1 == "libonnxruntime.so.1" { print $3 }')"
[[ -f "$ort_lib" ]] || { echo "bundle: $binary does not resolve libonnxruntime.so.1" >&2; exit 1; }
ort_dir="$(dirname "$(readlink -f "$ort_lib")")"

version="$(sed -n 's/^project(fastpath VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
name="fastpath-$version-linux-x64${cuda_archs:+-cuda-${cuda_archs//,/-}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
tree="$out/fastpath"
rm -rf "$tree"
mkdir -p "$tree/bin" "$tree/lib" "$tree/share/fastpath"

# The binary, without its symbol tables (the bundle is for running, not debugging).
cp "$binary" "$tree/bin/fastpath"
strip --strip-unneeded "$tree/bin/fastpath"
patchelf --set-rpath '$ORIGIN/../lib' "$tree/bin/fastpath"

# Its shared libraries, as the loader resolves them here, minus the C/C++ runtime and glibc.
base_system=" $(python3 "$root/tools/check_bundle.py" --base-system | tr '\n' ' ') linux-vdso.so.1 "
while read -r soname path; do
  [[ "$base_system" == *" $soname "* || "$soname" == /* ]] && continue
  [[ -f "$path" ]] || { echo "bundle: $binary needs $soname, which is not found" >&2; exit 1; }
  cp -L "$path" "$tree/lib/$soname"
  chmod u+w "$tree/lib/$soname"
done < <(ldd "$binary" | awk '$2 == "=>" { print $1, $3 } $2 != "=>" { print $1, "" }')
for lib in "$tree"/lib/*; do
  # Each finds its siblings by $ORIGIN, whoever loads it.
  [[ "$(basename "$lib")" == libonnxruntime.so.1 ]] && continue  # already $ORIGIN
  if readelf -d "$lib" | grep -q '(NEEDED)'; then
    patchelf --set-rpath '$ORIGIN' "$lib"
  fi
done

prune_report="{}"
if [[ -n "$cuda_archs" ]]; then
  cuda_ep="$ort_dir/libonnxruntime_providers_cuda.so"
  [[ -f "$cuda_ep" ]] || { echo "bundle: $cuda_ep is missing" >&2; exit 1; }
  echo "bundle: pruning $cuda_ep to sm_${cuda_archs//,/, sm_}"
  prune_report="$(python3 "$root/tools/prune_fatbin.py" --arch "$cuda_archs" "$cuda_ep" \
    "$tree/lib/libonnxruntime_providers_cuda.so")"
  cp "$ort_dir/libonnxruntime_providers_shared.so" "$tree/lib/"
fi

cp "$root/tools/generate_models.py" "$root/tools/make_test_models.py" "$tree/share/fastpath/"
mkdir -p "$tree/share/fastpath/prometheus"
cp "$root/deploy/prometheus/fastpath-rules.yaml" "$tree/share/fastpath/prometheus/"
cp "$root/tools/gpu-check.sh" "$root/tools/cpu-efficiency.sh" "$tree/share/fastpath/"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "$prune_report" >"$work/prune.json"
if ! python3 "$root/tools/check_bundle.py" --json "$tree" >"$work/closure.json"; then
  python3 "$root/tools/check_bundle.py" "$tree" >&2 || true
  echo "bundle: the bundle is not closed" >&2
  exit 1
fi
# FASTPATH_COMMIT names the commit where there is no .git to ask (a container build).
if [[ -n "${FASTPATH_COMMIT:-}" ]]; then
  commit="$FASTPATH_COMMIT"
else
  commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$root" diff --quiet HEAD 2>/dev/null || commit+="+uncommitted"
fi
python3 - "$tree/share/fastpath/bundle.json" "$version" "$commit" "$cuda_archs" \
  "$(basename "$(readlink -f "$ort_lib")")" "$work/closure.json" "$work/prune.json" <<'PY'
import json, sys
path, version, commit, archs, ort, closure_file, prune_file = sys.argv[1:8]
closure = json.load(open(closure_file))
prune = json.load(open(prune_file))
json.dump({
    "name": "fastpath",
    "version": version,
    "commit": commit,
    "platform": "linux-x64",
    "cuda_archs": [int(a) for a in archs.split(",")] if archs else [],
    "onnxruntime": ort.removeprefix("libonnxruntime.so."),
    "onnxruntime_source": "npm com.github.asus4.onnxruntime(.linux-x64-gpu)@0.4.9, a third-party "
                          "repackaging of Microsoft's prebuilt binaries",
    "requires_host": closure["requires"],
    "from_host": closure["from_host"],
    "cuda_provider_pruned": prune or None,
}, open(path, "w"), indent=2)
PY

echo "bundle: $tree ($(du -sm "$tree" | cut -f1) MB unpacked)"
if [[ $pack -eq 1 ]]; then
  tarball="$out/$name.tar.$format"
  compress=(zstd -19 -T0 -q -c)
  [[ "$format" == xz ]] && compress=(xz -9e -T0 -c)
  tar -C "$out" --owner=0 --group=0 --numeric-owner -cf - fastpath | "${compress[@]}" >"$tarball"
  size=$(stat -c %s "$tarball")
  budget_mib=32
  [[ -n "$cuda_archs" ]] && budget_mib=60
  awk -v f="$tarball" -v s="$size" -v b="$budget_mib" \
    'BEGIN { printf "bundle: %s: %.1f MiB (budget %d MiB)\n", f, s / 1048576, b }'
  if ((size > budget_mib * 1048576)); then
    echo "bundle: over the $budget_mib MiB budget" >&2
    exit 1
  fi
fi
