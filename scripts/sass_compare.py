#!/usr/bin/env python3
"""sass_compare.py -- do two builds of a CUDA object hold the same machine code?

    scripts/sass_compare.py OLD.o NEW.o [--map OLD_RE=NEW_RE ...]

A change written without a GPU (a refactor, a new template parameter) may
claim that the kernels a GPU has already run compile to the same SASS. This
checks the claim without a GPU: it disassembles both objects with the CUDA
toolkit's cuobjdump (which calls nvdisasm), takes each kernel's
instructions without their addresses and compares them kernel by kernel.
Kernels are matched by mangled name; --map rewrites an old name before the
match (a Python regex and its replacement, e.g. a template that gained a
trailing bool: --map 'I(Lb[01]E[ft])E=I\\1Lb0EE'). It prints one line per
kernel (same, DIFFERENT, or in one object only) and exits 1 if any old
kernel differs or is missing.

This machine's toolkit has no cuobjdump or nvdisasm; NVIDIA ships both on
PyPI (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm): install them into a
scratch folder with pip --target and put their bin/ folders on PATH.
Compile both objects with the same nvcc flags (the build's, -c -o X.o).
"""
import argparse
import re
import shutil
import subprocess
import sys


def kernels(obj):
    """{mangled name: [instruction, ...]} of obj's SASS."""
    out = subprocess.run(["cuobjdump", "-sass", obj], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit("sass_compare: cuobjdump -sass %s failed: %s" % (obj, out.stderr.strip()))
    found, name = {}, None
    for line in out.stdout.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            found[name] = []
        elif name and re.search(r"/\*[0-9a-f]{4}\*/", line):
            found[name].append(re.sub(r"/\*[0-9a-f]{4}\*/", "", line).split(";")[0].strip())
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--map", action="append", default=[], metavar="OLD_RE=NEW_RE")
    a = ap.parse_args()
    for tool in ("cuobjdump", "nvdisasm"):
        if not shutil.which(tool):
            sys.exit("sass_compare: %s is not on PATH (see this script's comment)" % tool)
    maps = []
    for m in a.map:
        if "=" not in m:
            sys.exit("sass_compare: --map wants OLD_RE=NEW_RE, not %r" % m)
        maps.append(tuple(m.split("=", 1)))
    old, new = kernels(a.old), kernels(a.new)
    bad, matched = 0, set()
    for name, code in sorted(old.items()):
        target = name
        for pat, rep in maps:
            target = re.sub(pat, rep, target)
        if target not in new:
            print("only in %s: %s" % (a.old, name))
            bad += 1
            continue
        matched.add(target)
        if new[target] == code:
            print("same       %s (%d instructions)" % (name, len(code)))
        else:
            differ = sum(1 for x, y in zip(code, new[target]) if x != y)
            print("DIFFERENT  %s (%d vs %d instructions, %d of the common ones differ)"
                  % (name, len(code), len(new[target]), differ))
            bad += 1
    for name in sorted(set(new) - matched):
        print("only in %s: %s" % (a.new, name))
    print("sass_compare: %d of %d old kernels the same" % (len(old) - bad, len(old)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
