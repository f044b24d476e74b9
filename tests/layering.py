#!/usr/bin/env python3
"""layering.py - the dependency order of the folders under src/, written
here once, and its check: a file may include headers of its own folder and
of folders on lower levels, never of a folder on its own level or above.
Every folder under src/ must be listed. Exits 1 naming each violation.

Usage: layering.py SRC_DIR
"""
import os
import re
import sys

# Lowest first; folders on one level may not include each other.
LEVELS = [
    ["base"],          # errors, Philox RNG, the backend interface, helpers
    ["layers"],        # the layer contract, one file per layer, the graph
    ["checkpoint"],    # schedules, budget search, program, plan, executor
    ["cpu", "cuda"],   # backend instances
    ["net"],           # the network object, optimizer, reports, pictures
    ["io", "data", "dist"],  # safetensors files, snapshots, datasets; data-parallel training
    ["models"],        # model builders
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main(src):
    level = {name: i for i, names in enumerate(LEVELS) for name in names}
    problems = []
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for folder in folders:
        if folder not in level:
            problems.append(f"src/{folder}/: not in the dependency order (tests/layering.py)")
            continue
        for root, _, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                if not name.endswith((".c", ".h", ".cu")):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, src)
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue  # the public header, or a system-style name
                        target = m.group(1).split("/")[0]
                        if target == folder:
                            continue
                        if target not in level:
                            problems.append(f"src/{rel}:{lineno}: includes {m.group(1)} "
                                            f"from src/{target}/, which is not in the order")
                        elif level[target] >= level[folder]:
                            problems.append(f"src/{rel}:{lineno}: includes {m.group(1)}: "
                                            f"src/{folder}/ may not use src/{target}/ "
                                            f"(level {level[folder]} <= {level[target]})")
    for p in problems:
        print(p)
    order = " <- ".join(", ".join(names) for names in LEVELS)
    print(f"{len(problems)} violation(s) of the order {order}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
