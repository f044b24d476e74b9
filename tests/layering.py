#!/usr/bin/env python3
"""layering.py - the dependency order of the folders under src/, written
here once, and its checks:

1. a file may include headers of its own folder and of folders on lower
   levels, never of a folder on its own level or above; every folder under
   src/ must be listed;
2. inside one folder, includes form no circle: a file x.c or x.h including
   "folder/y.h" depends on y (y.h and y.c are one node), and no chain of
   such edges leads back to where it started;
3. with --objects, inside one folder, calls form no circle either: the
   library's object files are read with nm (a file's undefined symbols
   against the symbols another file of its folder defines), and no file
   reaches itself through calls into other files of its folder; a call
   from one folder into another must also follow the order of check 1.

Exits 1 naming each violation (a circle as "a.c -> b.c (symbol) -> a.c").

Usage: layering.py SRC_DIR [--nm NM] [--objects OBJ...]
  OBJ may also be one argument of ';'-separated paths (CMake's
  $<TARGET_OBJECTS:...>); each object is named by its last two path
  components, folder/file.c.o, as CMake builds them.
"""
import os
import re
import subprocess
import sys

# Lowest first; folders on one level may not include each other.
LEVELS = [
    ["base"],          # errors, Philox RNG, the backend interface, helpers
    ["layers"],        # the layer contract, one file per layer, the graph
    ["checkpoint"],    # schedules, budget search, program, plan, executor
    ["cpu", "cuda"],   # backend instances
    ["net"],           # the network object, optimizer, reports, pictures
    ["io", "data"],    # safetensors files, snapshots; datasets
    ["text"],          # GPT-2's byte-level BPE tokenizer (reads JSON through io)
    ["dist"],          # data-parallel training (saves through io)
    ["models"],        # model builders
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = (".c", ".h", ".cu")


def levels():
    return {name: i for i, names in enumerate(LEVELS) for name in names}


def stem(name):
    """The node of a file in its folder's graph: x.c, x.h and x.cu are x."""
    for suffix in (".c.o", ".cu.o", ".o") + SOURCE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def find_cycle(graph):
    """A circle in graph (node -> {neighbour: label}) as a list of nodes
    [a, b, ..., a], or None. Deterministic: nodes and edges in sorted order."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {n: WHITE for n in graph}
    for targets in graph.values():
        for t in targets:
            colour.setdefault(t, WHITE)
    for start in sorted(colour):
        if colour[start] != WHITE:
            continue
        # Iterative depth-first search; path holds the grey nodes in order.
        path = [start]
        colour[start] = GREY
        iters = [iter(sorted(graph.get(start, {})))]
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                colour[path.pop()] = BLACK
                iters.pop()
                continue
            if colour[nxt] == GREY:
                return path[path.index(nxt):] + [nxt]
            if colour[nxt] == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                iters.append(iter(sorted(graph.get(nxt, {}))))
    return None


def strongly_connected(graph):
    """The groups of two or more nodes that all reach each other, sorted."""
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def visit(v):  # Tarjan's algorithm; folders are small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(groups)


def describe_cycles(kind, folder, graph, display):
    """One line per group of files that reach each other: a circle through
    them, 'a circle of calls in src/net/: a.c -> b.c (sym) -> a.c', and
    every file of the group when the circle does not pass through all."""
    lines = []
    for group in strongly_connected(graph):
        sub = {n: {t: lab for t, lab in graph.get(n, {}).items() if t in group} for n in group}
        cycle = find_cycle(sub)
        parts = [display(cycle[0])]
        for a, b in zip(cycle, cycle[1:]):
            parts.append(f"{display(b)} ({graph[a][b]})")
        line = f"a circle of {kind} in src/{folder}/: " + " -> ".join(parts)
        if len(group) > len(cycle) - 1:
            line += "; these all reach each other: " + ", ".join(display(n) for n in group)
        lines.append(line)
    return lines


def check_includes(src):
    """Checks 1 and 2; returns the problems found."""
    level = levels()
    problems = []
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for folder in folders:
        if folder not in level:
            problems.append(f"src/{folder}/: not in the dependency order (tests/layering.py)")
            continue
        graph = {}    # stem -> {stem: "includes folder/x.h"}
        files = {}    # stem -> the file names it stands for
        for root, _, names in os.walk(os.path.join(src, folder)):
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, src)
                node = stem(name)
                graph.setdefault(node, {})
                files.setdefault(node, []).append(name)
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue  # the public header, or a system-style name
                        target = m.group(1).split("/")[0]
                        if target == folder:
                            other = stem(os.path.basename(m.group(1)))
                            if other != node:
                                graph[node].setdefault(other, f"{name} includes {m.group(1)}")
                            continue
                        if target not in level:
                            problems.append(f"src/{rel}:{lineno}: includes {m.group(1)} "
                                            f"from src/{target}/, which is not in the order")
                        elif level[target] >= level[folder]:
                            problems.append(f"src/{rel}:{lineno}: includes {m.group(1)}: "
                                            f"src/{folder}/ may not use src/{target}/ "
                                            f"(level {level[folder]} <= {level[target]})")
        problems += describe_cycles("includes", folder, graph,
                                    lambda n: "/".join(sorted(files.get(n, [n + ".h"]))))
    return problems


def read_symbols(nm, objects):
    """{object: (defined, undefined)} external symbol names of each object
    file, from one nm call per kind (nm -A prefixes each line with its file)."""
    table = {obj: (set(), set()) for obj in objects}
    for k, flag in enumerate(("--defined-only", "--undefined-only")):
        out = subprocess.run([nm, "-A", "-P", "-g", flag] + list(objects), check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            path, sep, rest = line.rpartition(": ")
            if sep and path in table and rest.split():
                table[path][k].add(rest.split()[0])
    return table


def object_name(path):
    """(folder, file) of an object built from src/folder/file: CMake names
    it .../src/folder/file.c.o."""
    folder = os.path.basename(os.path.dirname(path))
    name = os.path.basename(path)
    return folder, name[:-2] if name.endswith(".o") else name


def check_calls(objects, symbols):
    """Check 3 over objects [(folder, file)] with symbols[(folder, file)] =
    (defined, undefined); returns the problems found."""
    level = levels()
    problems = []
    definer = {}
    for key in objects:
        for sym in symbols[key][0]:
            definer.setdefault(sym, key)
    graphs = {}  # folder -> {file: {file: first symbol called}}
    for key in sorted(objects):
        folder, name = key
        graphs.setdefault(folder, {}).setdefault(name, {})
        for sym in sorted(symbols[key][1]):
            other = definer.get(sym)
            if other is None or other == key:
                continue
            if other[0] == folder:
                graphs[folder][name].setdefault(other[1], sym)
            elif folder in level and other[0] in level and level[other[0]] >= level[folder]:
                problems.append(f"src/{folder}/{name} calls {sym} of src/{other[0]}/{other[1]}: "
                                f"src/{folder}/ may not use src/{other[0]}/ "
                                f"(level {level[folder]} <= {level[other[0]]})")
    for folder in sorted(graphs):
        problems += describe_cycles("calls", folder, graphs[folder], lambda n: n)
    return problems


def main(argv):
    args = list(argv)
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    src = args.pop(0)
    nm = "nm"
    objects = []
    while args:
        a = args.pop(0)
        if a == "--nm" and args:
            nm = args.pop(0)
        elif a == "--objects":
            while args and not args[0].startswith("--"):
                objects += [p for p in args.pop(0).split(";") if p]
        else:
            sys.exit(__doc__)
    problems = check_includes(src)
    if objects:
        table = read_symbols(nm, objects)
        keys = [object_name(obj) for obj in objects]
        symbols = {object_name(obj): table[obj] for obj in objects}
        if not any(defined for defined, _ in table.values()):
            problems.append(f"{nm} read no symbols from the {len(objects)} object(s): "
                            "the calls were not checked")
        problems += check_calls(keys, symbols)
    for p in problems:
        print(p)
    order = " <- ".join(", ".join(names) for names in LEVELS)
    checked = "includes and calls" if objects else "includes"
    print(f"{len(problems)} violation(s) ({checked}) of the order {order}, or circles inside a folder")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
