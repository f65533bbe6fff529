#!/usr/bin/env python3
"""Checks that a fastpath bundle is closed: every shared library it needs is inside it.

For every ELF file under the bundle (bin/, lib/), each NEEDED entry must resolve either to a
file in the bundle's lib/ or to the base system's C/C++ runtime and glibc, which every
Debian 12 and Ubuntu 24.04 base has. The GPU provider library may in addition need the
NVIDIA driver and CUDA's runtime libraries: those come from the GPU node (driver, image or
Python environment), never from the bundle.

It also checks that bin/fastpath finds lib/ through an $ORIGIN-relative RPATH/RUNPATH, and
reports the newest glibc and libstdc++ symbol versions the bundle needs (the oldest host it
can run on).

Usage: check_bundle.py BUNDLE_DIR [--json]
       check_bundle.py --base-system      (the allow-list, one soname a line: bundle.sh
                                           copies every other library into lib/)
Exit status: 0 closed, 1 something is missing (each one named), 2 bad arguments.
"""

import argparse
import json
import os
import re
import subprocess
import sys

# The C/C++ runtime and glibc: what the host provides (Debian 12 minbase, Ubuntu 24.04 base).
BASE_SYSTEM = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
    "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1",
}
# Needed only by the CUDA execution provider, and provided by the GPU node.
GPU_HOST = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|curand|cufft|cudnn\w*|nvinfer\w*|"
                      r"nvonnxparser|nvidia-ml)\.so(\.\d+)*$")
GPU_PROVIDER_FILES = {"libonnxruntime_providers_cuda.so", "libonnxruntime_providers_tensorrt.so"}


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def dynamic_entries(path):
    out = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    paths = re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library (?:rpath|runpath): \[([^\]]*)\]", out)
    return needed, paths


def required_versions(path):
    out = subprocess.run(["readelf", "-V", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"Name: (GLIBC|GLIBCXX|CXXABI)_([\d.]+)", out)


def version_key(text):
    return tuple(int(part) for part in text.split("."))


def check(bundle):
    problems = []
    lib_dir = os.path.join(bundle, "lib")
    in_bundle = set(os.listdir(lib_dir)) if os.path.isdir(lib_dir) else set()
    files = []
    for sub in ("bin", "lib"):
        for dirpath, _, names in os.walk(os.path.join(bundle, sub)):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                if os.path.isfile(path) and not os.path.islink(path) and is_elf(path):
                    files.append(path)
    if not files:
        problems.append(f"{bundle}: no ELF file under bin/ or lib/")
    newest = {}
    from_host = set()
    for path in files:
        rel = os.path.relpath(path, bundle)
        needed, search = dynamic_entries(path)
        for dep in needed:
            if dep in in_bundle:
                continue
            if dep in BASE_SYSTEM:
                from_host.add(dep)
                continue
            if os.path.basename(path) in GPU_PROVIDER_FILES and GPU_HOST.match(dep):
                from_host.add(dep + " (GPU node)")
                continue
            problems.append(f"{rel} needs {dep}, which is neither in lib/ nor part of the base "
                            "system's C/C++ runtime")
        if any(needed_dep in in_bundle for needed_dep in needed):
            # It must find them without LD_LIBRARY_PATH.
            want = "$ORIGIN/../lib" if rel.startswith("bin/") else "$ORIGIN"
            entries = [e for p in search for e in p.split(":")]
            if want not in entries:
                problems.append(f"{rel} needs libraries from lib/ but its RPATH/RUNPATH is "
                                f"{':'.join(entries) or 'empty'}, not {want}")
            stray = [e for e in entries if not e.startswith("$ORIGIN")]
            if stray:
                problems.append(f"{rel} searches {':'.join(stray)}, outside the bundle")
        for name, version in required_versions(path):
            if name not in newest or version_key(version) > version_key(newest[name]):
                newest[name] = version
    return {
        "bundle": bundle,
        "elf_files": len(files),
        "libraries_in_bundle": sorted(in_bundle),
        "from_host": sorted(from_host),
        "requires": {k: newest[k] for k in sorted(newest)},
        "problems": problems,
    }


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--base-system", action="store_true")
    args = parser.parse_args(argv)
    if args.base_system:
        print("\n".join(sorted(BASE_SYSTEM)))
        return 0
    if not args.bundle or not os.path.isdir(args.bundle):
        parser.error(f"{args.bundle} is not a directory")
    result = check(args.bundle)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"check_bundle: {result['elf_files']} ELF files, "
              f"{len(result['libraries_in_bundle'])} in lib/; from the host: "
              f"{', '.join(result['from_host'])}")
        print("check_bundle: needs at least " +
              ", ".join(f"{k} {v}" for k, v in result["requires"].items()))
        for problem in result["problems"]:
            print(f"check_bundle: {problem}", file=sys.stderr)
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
