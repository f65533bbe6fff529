#!/usr/bin/env python3
"""tools/prune_fatbin.py on a shared library whose .nv_fatbin section the test writes itself.

A real CUDA library is 230 MB and needs nvcc; the container format is small, so the test
builds a shared object (with the system C compiler) holding three containers:
  1. cubins for sm_80, sm_86, sm_90 and sm_120        -> sm_90 kept
  2. cubins for sm_80 and sm_86, PTX for compute_80    -> for sm_90 the PTX (no sm_9x cubin);
                                                          for sm_89 the sm_86 cubin
  3. a cubin for sm_120 only                           -> left whole
and checks what remains, that everything outside the section is untouched, and that the
result parses again.
"""

import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "prune_fatbin.py")
sys.path.insert(0, os.path.dirname(TOOL))
import prune_fatbin  # noqa: E402

ENTRY_HEADER_SIZE = 64


def entry(kind, arch, payload):
    padded = payload + bytes(-len(payload) % 8)
    header = struct.pack("<HHIQIIHHI", kind, 0x0101, ENTRY_HEADER_SIZE, len(padded), 0, 0, 0, 0,
                         arch)
    header += bytes(ENTRY_HEADER_SIZE - len(header))
    return header + padded


def container(entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", prune_fatbin.CONTAINER_MAGIC, 1, 16, len(body)) + body


def c_array(data):
    return ", ".join(str(b) for b in data)


class PruneFatbinTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.section = (
            container([entry(2, 80, b"A" * 40), entry(2, 86, b"B" * 24), entry(2, 90, b"C" * 32),
                       entry(2, 120, b"D" * 16)]) +
            container([entry(2, 80, b"E" * 8), entry(2, 86, b"F" * 8), entry(1, 80, b"ptx80")]) +
            container([entry(2, 120, b"G" * 8)]))
        source = os.path.join(self.dir.name, "fat.c")
        with open(source, "w") as f:
            f.write("__attribute__((section(\".nv_fatbin\"), aligned(8), used))\n"
                    f"static const unsigned char fatbin[] = {{ {c_array(self.section)} }};\n"
                    "int marker(void) { return 42; }\n")
        self.library = os.path.join(self.dir.name, "libfat.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", self.library, source], check=True)

    def read_section(self, path):
        offset, size = prune_fatbin.read_section(path, ".nv_fatbin")
        with open(path, "rb") as f:
            f.seek(offset)
            return offset, bytearray(f.read(size))

    def kept(self, data):
        return [[(kind, arch) for _, _, kind, arch in entries]
                for _, _, entries in prune_fatbin.parse_containers(data)]

    def test_listing(self):
        _, data = self.read_section(self.library)
        self.assertEqual(self.kept(data), [[(2, 80), (2, 86), (2, 90), (2, 120)],
                                           [(2, 80), (2, 86), (1, 80)], [(2, 120)]])

    def test_prune_to_sm90(self):
        out = os.path.join(self.dir.name, "pruned.so")
        run = subprocess.run([sys.executable, TOOL, "--arch", "90", self.library, out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        offset, data = self.read_section(out)
        # sm_90 alone in the first; the PTX for the second (no sm_9x cubin there); the third
        # has nothing for sm_90 and is left whole.
        self.assertEqual(self.kept(data), [[(2, 90)], [(1, 80)], [(2, 120)]])
        self.assertEqual(len(data), len(self.section))  # the section keeps its size
        first_size = 16 + ENTRY_HEADER_SIZE + 32
        self.assertIn(b"C" * 32, bytes(data[:first_size]))
        first_end = len(container([entry(2, 80, b"A" * 40), entry(2, 86, b"B" * 24),
                                   entry(2, 90, b"C" * 32), entry(2, 120, b"D" * 16)]))
        self.assertEqual(bytes(data[first_size:first_end]), bytes(first_end - first_size))
        # Outside the section nothing changed.
        with open(self.library, "rb") as f:
            original = f.read()
        with open(out, "rb") as f:
            pruned = f.read()
        self.assertEqual(original[:offset], pruned[:offset])
        self.assertEqual(original[offset + len(data):], pruned[offset + len(data):])
        self.assertIn("zeroed", run.stdout)

    def test_same_major_lower_minor_cubin_serves_a_later_minor(self):
        out = os.path.join(self.dir.name, "pruned89.so")
        subprocess.run([sys.executable, TOOL, "--arch", "89", self.library, out], check=True,
                       capture_output=True)
        _, data = self.read_section(out)
        self.assertEqual(self.kept(data), [[(2, 86)], [(2, 86)], [(2, 120)]])

    def test_errors(self):
        text = os.path.join(self.dir.name, "not-elf.so")
        with open(text, "w") as f:
            f.write("x" * 100)
        run = subprocess.run([sys.executable, TOOL, "--list", text], capture_output=True,
                             text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn("not a 64-bit little-endian ELF file", run.stderr)
        run = subprocess.run([sys.executable, TOOL, "--arch", "sm_x", self.library, text],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("is not a CUDA architecture", run.stderr)


if __name__ == "__main__":
    unittest.main()
