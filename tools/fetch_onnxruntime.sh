#!/usr/bin/env bash
# Fetches the official prebuilt ONNX Runtime 1.29.0 (CPU library, C/C++ headers and the
# CUDA/TensorRT plugin execution providers) through npm, verifies the pinned sha512 of each
# package, and extracts only what the build needs into an ignored folder:
#   <dest>/include/*.h   <dest>/lib/libonnxruntime.so*   <dest>/lib/libonnxruntime_providers_*.so
# The result is reused on the next run. Usage: tools/fetch_onnxruntime.sh [dest]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/.deps/onnxruntime-1.29.0}"
stamp="$dest/.complete"

cpu_pkg="com.github.asus4.onnxruntime@0.4.9"
cpu_sha512="BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg=="
gpu_pkg="com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9"
gpu_sha512="FopIhNE/Ng+v2X65wVc9clPCBCvhvA53Hxo2U0Kf5fGdVsC7iCA+mZ0KLWggcQAj7TIZ6pNidR4AC10g74Xo6w=="
# The stamp names what was extracted, so a folder left by an older version of this script (or
# by other pins) is fetched again rather than reused.
want_stamp="$cpu_pkg $cpu_sha512 $gpu_pkg $gpu_sha512 cuda,shared,tensorrt"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]]; then
  echo "onnxruntime: reusing $dest"
  exit 0
fi
headers="package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers"

command -v npm >/dev/null || { echo "onnxruntime: npm is required (apt-get install npm)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fetch() {  # fetch <package@version> <sha512-base64>  -> prints the tarball path
  local pkg="$1" want="$2" tgz got
  (cd "$work" && npm pack --ignore-scripts --silent "$pkg" >/dev/null)
  tgz="$(ls -t "$work"/*.tgz | head -n 1)"
  got="$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [[ "$got" != "$want" ]]; then
    echo "onnxruntime: sha512 mismatch for $pkg: got $got, pinned $want" >&2
    exit 1
  fi
  mv "$tgz" "$work/$(echo "$pkg" | tr '@/' '__').tgz"
  echo "$work/$(echo "$pkg" | tr '@/' '__').tgz"
}

echo "onnxruntime: fetching $cpu_pkg and $gpu_pkg"
cpu_tgz="$(fetch "$cpu_pkg" "$cpu_sha512")"
gpu_tgz="$(fetch "$gpu_pkg" "$gpu_sha512")"

# Copies keep the archive's times, so a re-fetch of the same files relinks nothing.
# Assemble next to the destination and swap it in at the end, so that a build or test running
# against the old folder sees it disappear only for the instant of the rename.
stage="$dest.partial"
rm -rf "$stage" && mkdir -p "$stage/include" "$stage/lib"
tar -xzf "$cpu_tgz" -C "$work" "$headers" package/Plugins/Linux/x64/libonnxruntime.so
cp --preserve=timestamps "$work/$headers"/*.h "$stage/include/"
cp --preserve=timestamps "$work/package/Plugins/Linux/x64/libonnxruntime.so" "$stage/lib/libonnxruntime.so.1.29.0"
ln -sf libonnxruntime.so.1.29.0 "$stage/lib/libonnxruntime.so.1"
ln -sf libonnxruntime.so.1 "$stage/lib/libonnxruntime.so"
tar -xzf "$gpu_tgz" -C "$work" --wildcards 'package/Plugins/Linux/x64/libonnxruntime_providers_*.so'
for provider in cuda shared tensorrt; do
  cp --preserve=timestamps "$work/package/Plugins/Linux/x64/libonnxruntime_providers_$provider.so" "$stage/lib/"
done
echo "$want_stamp" >"$stage/.complete"
rm -rf "$dest.old"
[[ -e "$dest" ]] && mv "$dest" "$dest.old"
mv "$stage" "$dest"
rm -rf "$dest.old"
echo "onnxruntime: installed into $dest"
