#!/usr/bin/env python3
"""Keeps only the device code that named GPU architectures need in a CUDA shared library.

ONNX Runtime's CUDA execution provider is a fat binary: every kernel is compiled for several
GPU architectures (sm_75 ... sm_120), and 166 MB of its 230 MB are that device code, in the
`.nv_fatbin` section. A bundle for one GPU family needs one of those images per kernel.
NVIDIA's nvprune does this for object files and static libraries, not for a linked shared
library, so this tool does it on the linked file:

- `.nv_fatbin` is a sequence of fatbin containers, one per compilation unit. Each container is
  a 16-byte header (magic 0xBA55ED50, version, header size, size of what follows) and a list
  of entries: an entry header (kind: 1 PTX, 2 cubin; its SM architecture; payload size) and
  its payload (zstd-compressed in CUDA 13 builds).
- In each container the entries the targets need are moved to the front and the container's
  size is lowered to cover just them; the bytes after them become zeros. The section keeps
  its size and place, so no address, relocation or `__fatbinwrap` pointer changes, and the
  zeros cost nothing once the bundle is compressed.
- For each target sm_XY an entry is needed when it is the cubin of the same major version
  with the highest minor <= Y (SASS runs on later minors of its major), or, for a container
  with no such cubin, the PTX of the highest architecture <= XY (the driver compiles it).
- A container with nothing for any target is left whole: those kernels could not run on the
  targets anyway, and the CUDA runtime treats them exactly as before.

Usage: prune_fatbin.py --arch 90[,89,...] IN OUT        (prints what it kept, as JSON)
       prune_fatbin.py --list IN                          (what the file holds, per arch)
Exit status: 0 done, 1 the file has no `.nv_fatbin` or a malformed one, 2 bad arguments.
"""

import argparse
import collections
import json
import shutil
import struct
import sys

CONTAINER_MAGIC = 0xBA55ED50
CONTAINER_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
# kind, version, header size, padded payload size, compressed size, (unknown), minor, major,
# arch. The rest of the entry header (name offset, flags, uncompressed size) is kept as is.
ENTRY_HEADER = struct.Struct("<HHIQIIHHI")
KIND_PTX = 1
KIND_CUBIN = 2
KIND_NAMES = {KIND_PTX: "ptx", KIND_CUBIN: "cubin"}


class FatbinError(Exception):
    pass


def read_section(path, name):
    """Returns (file offset, size) of the named section of a 64-bit little-endian ELF file."""
    with open(path, "rb") as f:
        ident = f.read(64)
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise FatbinError(f"{path}: not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", ident, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        strtab = sections[shstrndx]
        f.seek(strtab[4])
        names = f.read(strtab[5])
        for sh_name, _, _, _, offset, size, *_ in sections:
            end = names.index(b"\0", sh_name)
            if names[sh_name:end].decode() == name:
                return offset, size
    raise FatbinError(f"{path}: no {name} section (not a CUDA fat binary)")


def parse_containers(data):
    """Yields (offset, header size, [(entry offset, entry length, kind, arch)]) per container."""
    pos = 0
    while pos + CONTAINER_HEADER.size <= len(data):
        magic, _, header_size, size = CONTAINER_HEADER.unpack_from(data, pos)
        if magic != CONTAINER_MAGIC:
            # Containers are 8-byte aligned; anything between them must be padding.
            if any(data[pos:pos + 8]):
                raise FatbinError(f"no fatbin container at offset {pos:#x} of .nv_fatbin")
            pos += 8
            continue
        end = pos + header_size + size
        if end > len(data):
            raise FatbinError(f"the container at {pos:#x} runs past the end of .nv_fatbin")
        entries = []
        entry = pos + header_size
        while entry < end:
            kind, _, entry_header, payload, _, _, _, _, arch = ENTRY_HEADER.unpack_from(data, entry)
            length = entry_header + payload
            if kind not in KIND_NAMES or length <= 0 or entry + length > end:
                raise FatbinError(f"a malformed entry at {entry:#x} in the container at {pos:#x}")
            entries.append((entry, length, kind, arch))
            entry += length
        yield pos, header_size, entries
        pos = end


def needed_entries(entries, targets):
    """The entries of one container that the target architectures need (see the docstring)."""
    keep = set()
    for target in targets:
        cubins = [e for e in entries if e[2] == KIND_CUBIN and e[3] // 10 == target // 10
                  and e[3] <= target]
        if cubins:
            best = max(e[3] for e in cubins)
            keep.update(e for e in cubins if e[3] == best)
            continue
        ptx = [e for e in entries if e[2] == KIND_PTX and e[3] <= target]
        if ptx:
            best = max(e[3] for e in ptx)
            keep.update(e for e in ptx if e[3] == best)
    return [e for e in entries if e in keep]  # in their original order


def summarize(entries_by_arch):
    return {f"{KIND_NAMES[kind]} sm_{arch}": {"entries": count, "bytes": size}
            for (kind, arch), (count, size) in sorted(entries_by_arch.items())}


def prune(data, targets):
    """Prunes the section bytes in place; returns a JSON-able summary."""
    kept = collections.defaultdict(lambda: [0, 0])
    dropped = collections.defaultdict(lambda: [0, 0])
    untouched = 0
    containers = 0
    for pos, header_size, entries in list(parse_containers(data)):
        containers += 1
        keep = needed_entries(entries, targets)
        if not keep:
            untouched += 1
            continue
        payload = b"".join(bytes(data[off:off + length]) for off, length, _, _ in keep)
        old_size = sum(length for _, length, _, _ in entries)
        start = pos + header_size
        data[start:start + old_size] = payload + bytes(old_size - len(payload))
        struct.pack_into("<Q", data, pos + 8, len(payload))
        for entry in entries:
            bucket = kept if entry in keep else dropped
            bucket[(entry[2], entry[3])][0] += 1
            bucket[(entry[2], entry[3])][1] += entry[1]
    return {
        "targets": [f"sm_{t}" for t in targets],
        "containers": containers,
        "containers_without_a_target_image": untouched,
        "kept": summarize(kept),
        "zeroed": summarize(dropped),
        "zeroed_bytes": sum(size for _, size in dropped.values()),
    }


def listing(data):
    held = collections.defaultdict(lambda: [0, 0])
    containers = 0
    for _, _, entries in parse_containers(data):
        containers += 1
        for _, length, kind, arch in entries:
            held[(kind, arch)][0] += 1
            held[(kind, arch)][1] += length
    return {"containers": containers, "images": summarize(held)}


def parse_archs(text):
    archs = []
    for item in text.split(","):
        item = item.strip().lower().removeprefix("sm_")
        if not item.isdigit() or not 30 <= int(item) <= 199:
            raise argparse.ArgumentTypeError(f"'{item}' is not a CUDA architecture such as 90")
        archs.append(int(item))
    return sorted(set(archs))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=parse_archs, help="comma-separated, e.g. 90 or 80,90")
    parser.add_argument("--list", action="store_true", help="print what the file holds")
    parser.add_argument("input")
    parser.add_argument("output", nargs="?")
    args = parser.parse_args(argv)
    if args.list == bool(args.arch) or (args.arch and not args.output):
        parser.error("give either --list IN, or --arch LIST IN OUT")
    try:
        offset, size = read_section(args.input, ".nv_fatbin")
        with open(args.input, "rb") as f:
            f.seek(offset)
            data = bytearray(f.read(size))
        if args.list:
            print(json.dumps(listing(data), indent=2))
            return 0
        summary = prune(data, args.arch)
        list(parse_containers(data))  # the result must parse again
    except FatbinError as e:
        print(f"prune_fatbin: {e}", file=sys.stderr)
        return 1
    if args.output != args.input:
        shutil.copyfile(args.input, args.output)
        shutil.copymode(args.input, args.output)
    with open(args.output, "r+b") as f:
        f.seek(offset)
        f.write(data)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
