#!/usr/bin/env python3
"""layering_selftest.py - proves that tests/layering.py fails on what it
is meant to reject: a tiny src/ tree with a circle of includes inside a
folder, two objects (compiled here with CC) that call each other, a call
from a lower folder into a higher one; and that it passes the same inputs
without the circle.

Usage: layering_selftest.py CC NM
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layering  # noqa: E402

FAILURES = []


def expect(what, cond):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def tree(root, circle):
    """src/ with every folder of the order; in base/, a.c includes
    base/b.h, and (when circle) b.c includes base/c.h and c.h base/a.h."""
    src = os.path.join(root, "src")
    for names in layering.LEVELS:
        for name in names:
            os.makedirs(os.path.join(src, name), exist_ok=True)
    write(os.path.join(src, "base", "a.h"), "int a(void);\n")
    write(os.path.join(src, "base", "a.c"), '#include "base/b.h"\nint a(void) { return b(); }\n')
    write(os.path.join(src, "base", "b.h"), "int b(void);\n")
    write(os.path.join(src, "base", "b.c"),
          '#include "base/c.h"\nint b(void) { return 1; }\n' if circle else "int b(void) { return 1; }\n")
    write(os.path.join(src, "base", "c.h"), '#include "base/a.h"\n' if circle else "\n")
    return src


def compile_objects(root, cc, sources):
    """Compiles {"folder/x.c": text} to root/obj/src/folder/x.c.o as CMake
    names them; returns the object paths."""
    objects = []
    for rel, text in sorted(sources.items()):
        c = os.path.join(root, "csrc", rel)
        write(c, text)
        obj = os.path.join(root, "obj", "src", rel + ".o")
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        subprocess.run([cc, "-c", "-O0", "-o", obj, c], check=True)
        objects.append(obj)
    return objects


def run(args):
    """layering.main's exit status and what it printed."""
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = layering.main(args)
    return status, out.getvalue()


def main(cc, nm):
    with tempfile.TemporaryDirectory() as root:
        status, out = run([tree(os.path.join(root, "good"), circle=False)])
        expect("an include chain without a circle passes", status == 0)
        status, out = run([tree(os.path.join(root, "bad"), circle=True)])
        expect("a circle of includes fails", status == 1)
        expect("... and is named: " + out.splitlines()[0],
               "a circle of includes in src/base/: a.c/a.h -> b.c/b.h (a.c includes base/b.h) "
               "-> c.h (b.c includes base/c.h) -> a.c/a.h (c.h includes base/a.h)" in out)

        src = tree(os.path.join(root, "calls"), circle=False)
        chain = compile_objects(os.path.join(root, "chain"), cc, {
            "net/one.c": "int two(void);\nint one(void) { return two(); }\n",
            "net/two.c": "int three(void);\nint two(void) { return three(); }\n",
            "net/three.c": "int three(void) { return 3; }\n",
        })
        status, out = run([src, "--nm", nm, "--objects", ";".join(chain)])
        expect("calls without a circle pass", status == 0)

        circle = compile_objects(os.path.join(root, "circle"), cc, {
            "net/one.c": "int two(void);\nint one(void) { return two(); }\n",
            "net/two.c": "int three(void);\nint two(void) { return three(); }\n",
            "net/three.c": "int one(void);\nint three(void) { return one(); }\n",
        })
        status, out = run([src, "--nm", nm, "--objects"] + circle)
        expect("a circle of calls fails", status == 1)
        expect("... and is named: " + out.splitlines()[0],
               "a circle of calls in src/net/: one.c -> two.c (two) -> three.c (three) -> one.c (one)"
               in out)

        upward = compile_objects(os.path.join(root, "upward"), cc, {
            "base/low.c": "int high(void);\nint low(void) { return high(); }\n",
            "net/high.c": "int high(void) { return 1; }\n",
        })
        status, out = run([src, "--nm", nm, "--objects", ";".join(upward)])
        expect("a call from a lower folder into a higher one fails", status == 1)
        expect("... and is named: " + out.splitlines()[0],
               "src/base/low.c calls high of src/net/high.c" in out)

        across = compile_objects(os.path.join(root, "across"), cc, {
            "net/a.c": "int b(void);\nint a(void) { return b(); }\n",
            "io/b.c": "int a(void);\nint b(void) { return a(); }\n",
        })
        status, out = run([src, "--nm", nm, "--objects", ";".join(across)])
        expect("calls between two folders are the order's business, not a circle in one folder",
               status == 1 and "a circle of" not in out and "src/net/a.c calls b of src/io/b.c" in out)

        status, out = run([src, "--nm", "true", "--objects", ";".join(chain)])
        expect("objects nm reads nothing from fail, instead of passing unchecked",
               status == 1 and "read no symbols" in out)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
