#!/usr/bin/env python3
"""names.py - checks that every public function follows the naming rule
of its kind (docs/guide.md, "Names"; the comment atop include/sublinear.h).

Usage: names.py INCLUDE_DIR [--list]

Reads every SL_API declaration of INCLUDE_DIR/sublinear.h and
INCLUDE_DIR/sublinear/*.h, sorts each function into one kind by its shape
(what it returns and takes) and checks the kind's rule. Prints each
violation with the rule it breaks and exits 1 when there is one; prints
how many functions each kind holds (--list: which). The checks are
deliberately mechanical, so that a new name that drifts from its kind (a
setter without set_, a get_, an _ex, a positional variant, a count that
is not a _count) fails here rather than in review; the lists below
(verbs, variant words, the two network constructors) are the documented
exceptions, and adding to them is a decision the guide records.
"""
import os
import re
import sys

# Two network constructors named after the kind of network they make
# (the library's central calls); every other object constructor is
# sl_<object>_<how>.
CENTRAL_CONSTRUCTORS = {"sl_sequential", "sl_sublinear"}
# The one setter without an object: the calling thread's error message.
GLOBAL_SETTERS = {"sl_set_error"}
# Verbs of calls that take an object and plain values only and are not
# setters: what they do to the object.
ACTION_VERBS = {"update", "prepare", "check", "reset"}
# Words a call may add to another call's name: _with (the same call with
# an options struct), _tokens (token ids instead of images), _memory (a
# file's bytes instead of its path), _grad (the gradient instead of the
# value), _count (the number of), and the verbs of a thing's own calls.
VARIANT_WORDS = {"with", "tokens", "memory", "grad", "count", "add", "read", "write"}
# Words that end a layer constructor's name but make it read as a call.
LAYER_VERBS = {"add", "append", "set", "get", "create", "update", "remove"}
# Words a file-touching call names itself by.
FILE_VERBS = {"save", "load", "read", "write", "open"}
INTEGERS = {"int", "int64_t", "size_t", "uint64_t", "int32_t", "uint32_t"}

KINDS = [
    ("free", "void sl_<object>_free(sl_<object> *), NULL accepted"),
    ("constructor", "sl_status sl_<object>_<how>(..., sl_<object> **out), "
                    "or sl_sequential / sl_sublinear"),
    ("layer", "sl_layer *sl_<layer>(...), torch's names, no verb"),
    ("variant", "sl_<call>_with(..., const sl_<noun>_options *)"),
    ("options", "sl_<noun>_options sl_<noun>_defaults(void) or sl_<noun>_<kind>(...)"),
    ("setter", "sl_status sl_<noun>_set_<what>(sl_<noun> *, value...)"),
    ("count", "sl_<noun>_<thing>_count: a plain integer, or sl_status with *count "
              "when reading it can fail"),
    ("getter", "sl_<noun>_<what>(const sl_<noun> *) returns the value itself (it cannot "
               "fail), no get_"),
    ("call", "sl_status sl_<noun>_<verb or what>(sl_<noun> *, ..., results *): does or "
             "reads something; get_ only where sl_<noun>_<what> names the struct it fills; "
             "sl_<verb>_<what> for the central calls (sl_save_model ...)"),
]


def strip(text):
    """The header without comments and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("#"))


class Param:
    def __init__(self, text):
        text = " ".join(text.split())
        self.text = text
        m = re.match(r"^(.*?)(\w+)$", text)
        if text in ("void", "...") or not m or not m.group(1).strip():
            self.name, self.type = "", text
        else:
            self.name, self.type = m.group(2), m.group(1).strip()
        self.depth = self.type.count("*")
        self.const = self.type.startswith("const ")
        base = re.sub(r"\bconst\b|\*", " ", self.type).split()
        self.base = base[0] if base else ""


class Function:
    def __init__(self, name, ret, params, header):
        self.name, self.header = name, header
        self.ret = " ".join(ret.replace("*", " * ").split()).replace(" *", "*")
        self.params = [Param(p) for p in params if p.strip() and p.strip() != "void"]
        self.words = name[len("sl_"):].split("_")


def split_params(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse(include):
    """(functions, types, opaque): every SL_API function, every typedef
    name with the header defining it, and the opaque handle types."""
    headers = [os.path.join(include, "sublinear.h")]
    sub = os.path.join(include, "sublinear")
    if os.path.isdir(sub):
        headers += sorted(os.path.join(sub, f) for f in os.listdir(sub) if f.endswith(".h"))
    functions, types, opaque = [], {}, set()
    for path in headers:
        if not os.path.exists(path):
            continue
        rel = os.path.relpath(path, include)
        with open(path, encoding="utf-8") as f:
            text = strip(f.read())
        for m in re.finditer(r"typedef\s+struct\s+(sl_\w+)\s+(sl_\w+)\s*;", text):
            opaque.add(m.group(2))
            types[m.group(2)] = rel
        for m in re.finditer(r"}\s*(sl_\w+)\s*;", text):
            types[m.group(1)] = rel
        for m in re.finditer(r"typedef[^;{]*?\(\s*\*?\s*(sl_\w+)\s*\)\s*\(", text):
            types[m.group(1)] = rel
        for m in re.finditer(r"typedef\s+\w+\s+(sl_\w+)\s*\(", text):
            types[m.group(1)] = rel
        for m in re.finditer(r"\bSL_API\s+([^;(]*?)\b(\w+)\s*\(", text):
            depth, i = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            functions.append(Function(m.group(2), m.group(1), split_params(text[m.end():i - 1]),
                                      rel))
    return functions, types, opaque


def noun_of(f, opaque):
    """The object a call works on: its first parameter's opaque type."""
    if f.params and f.params[0].base in opaque and f.params[0].depth == 1:
        return f.params[0].base
    return None


def classify(f, names, opaque):
    out_handles = [p for p in f.params if p.depth == 2 and not p.const and p.base.startswith("sl_")]
    if f.name.endswith("_free"):
        return "free"
    if out_handles and out_handles[0].base in opaque:
        return "constructor"
    if f.ret == "sl_layer*":
        return "layer"
    if f.name.endswith("_with"):
        return "variant"
    if re.match(r"^sl_\w+_(options|config)$", f.ret):
        return "options"
    if "_set_" in f.name or f.name.startswith("sl_set_"):
        return "setter"
    if f.name.endswith("_count"):
        return "count"
    if f.ret not in ("sl_status", "void"):
        return "getter"
    return "call"


def check(functions, types, opaque):
    """Violations, as 'name (header): what is wrong'."""
    bad = []
    names = {f.name for f in functions}
    by_name = {f.name: f for f in functions}

    def fail(f, msg):
        bad.append("%s (%s): %s" % (f.name, f.header, msg))

    for f in functions:
        kind = classify(f, names, opaque)
        w = f.words
        if not re.match(r"^sl_[a-z0-9]+(_[a-z0-9]+)*$", f.name):
            fail(f, "public names are sl_ and lower-case words joined by _")
        if "ex" in w:
            fail(f, "no _ex variants: a call with more choices is <call>_with(const "
                    "sl_<noun>_options *)")
        if "get" in w:
            i = w.index("get")
            fills = "sl_" + "_".join(w[:i] + w[i + 1:])
            if fills not in types or not any(p.base == fills and p.depth == 1 and not p.const
                                             for p in f.params):
                fail(f, "getters are sl_<noun>_<what>, without get_ (get_ only where "
                        "sl_<noun>_<what> names the struct type the call fills)")
        # Variants: a name that is another call's plus words.
        for g in names:
            if f.name.startswith(g + "_") and f.name != g:
                rest = f.name[len(g) + 1:].split("_")
                prop = g.rsplit("_", 1)
                setter = "%s_set_%s" % (prop[0], prop[1] + "_" + "_".join(rest)) \
                    if len(prop) == 2 else ""
                if rest[0] not in VARIANT_WORDS and setter not in names:
                    fail(f, "a variant of %s adds _with and an options struct, not _%s "
                            "(words a call may add: %s)"
                         % (g, "_".join(rest), ", ".join(sorted(VARIANT_WORDS))))
        if kind == "free":
            if f.ret != "void" or len(f.params) != 1 or f.params[0].depth != 1:
                fail(f, "sl_<object>_free takes the object alone and returns void")
            elif f.name not in (f.params[0].base + "_free", f.params[0].base + "s_free"):
                fail(f, "frees an %s: name it %s_free" % (f.params[0].base, f.params[0].base))
        out_handles = [p for p in f.params if p.depth == 2 and not p.const
                       and p.base.startswith("sl_")]
        for p in out_handles:
            if f.ret != "sl_status":
                fail(f, "a constructor returns sl_status and gives the object through "
                        "its last parameter")
            trailing = f.params[f.params.index(p) + 1:]
            if any(not (q.base in INTEGERS and q.depth == 1) for q in trailing):
                fail(f, "the new object (%s **%s) is the last parameter (a list's count "
                        "may follow)" % (p.base, p.name))
            if p.base + "_free" not in names and p.base + "s_free" not in names:
                fail(f, "makes an %s but there is no %s_free" % (p.base, p.base))
            if p.base in opaque and not f.name.startswith(p.base + "_") and \
                    f.name not in CENTRAL_CONSTRUCTORS:
                fail(f, "a constructor of %s is named %s_<how> (create, open, load, ...)"
                     % (p.base, p.base))
        if kind == "layer":
            if w[-1] in LAYER_VERBS:
                fail(f, "a layer constructor is named after the layer (torch's noun); "
                        "_%s reads as a call (sl_block_add appends)" % w[-1])
        if f.name.endswith("_with"):
            base = f.name[:-len("_with")]
            opts = [p for p in f.params if p.const and p.depth == 1
                    and re.match(r"^sl_\w+_options$", p.base)]
            if not opts:
                fail(f, "a _with variant takes its choices as a const sl_<noun>_options *")
            if base not in names:
                fail(f, "a _with variant has a plain form %s" % base)
            if kind == "layer" and (len(f.params) != 1 or not opts
                                    or opts[0].base != base + "_options"):
                fail(f, "a layer's _with variant takes one const %s_options *" % base)
        if kind == "options" or f.name.endswith("_defaults"):
            m = re.match(r"^(sl_\w+)_(options|config)$", f.ret)
            if not m:
                fail(f, "sl_<noun>_defaults returns an sl_<noun>_options or _config")
            elif not f.name.startswith(m.group(1) + "_"):
                fail(f, "a preset of %s is named %s_defaults or %s_<kind>"
                     % (f.ret, m.group(1), m.group(1)))
            elif f.name.endswith("_defaults") and f.params:
                fail(f, "sl_<noun>_defaults takes no arguments (a preset with arguments "
                        "is sl_<noun>_<kind>)")
        if kind == "setter" and f.name not in GLOBAL_SETTERS:
            noun = f.name.split("_set_")[0]
            if f.ret != "sl_status":
                fail(f, "a setter returns sl_status")
            if not f.params or f.params[0].base != noun or f.params[0].depth != 1 \
                    or f.params[0].const:
                fail(f, "sl_<noun>_set_<what> takes the %s it changes first" % noun)
        # Setter-shaped calls: the object, then plain values.
        noun = noun_of(f, opaque)
        if noun and not f.params[0].const and f.ret in ("sl_status", "void") \
                and kind not in ("setter", "free") \
                and all(p.depth == 0 for p in f.params[1:]) \
                and not set(w) & ACTION_VERBS:
            fail(f, "takes the %s and plain values: a setter is %s_set_<what>; a call "
                    "that is not names its verb (%s)"
                 % (noun, noun, ", ".join(sorted(ACTION_VERBS))))
        # An on/off switch (an int named like a state: enabled, frozen) is
        # a setter whatever else the call gives back.
        if noun and kind != "setter" and len(f.params) > 1 and f.params[1].type == "int" \
                and re.match(r"^(on|\w+(ed|en))$", f.params[1].name):
            fail(f, "switches %s on and off: a setter is %s_set_<what>"
                 % (f.params[1].name, noun))
        if kind == "count":
            counts = [p for p in f.params if p.name == "count" and p.depth == 1
                      and p.base in INTEGERS and not p.const]
            if f.ret not in INTEGERS and not (f.ret == "sl_status" and counts
                                              and counts[0] is f.params[-1]):
                fail(f, "a count returns a plain integer, or sl_status with the number in "
                        "its last parameter *count when reading it can fail")
        if f.ret in INTEGERS and kind != "count":
            if w[-1].endswith("s") or w[-1] in ("length", "num") or "num" in w \
                    or w[0] == "n":
                fail(f, "a number of things is sl_<noun>_<thing>_count")
        files = [p for p in f.params if p.base == "char" and p.const and p.depth == 1
                 and (p.name in ("path", "dir") or p.name.endswith("_path"))]
        if files and kind != "constructor" and not set(w) & FILE_VERBS:
            fail(f, "a call that takes a file names its verb (%s)"
                 % ", ".join(sorted(FILE_VERBS)))
        # A property with a type of its own sits with that type.
        m = re.match(r"^(sl_[a-z0-9]+)_(?:set_)?(\w+)$", f.name)
        if m and kind in ("setter", "getter") and "sl_" + m.group(2) in types \
                and types["sl_" + m.group(2)] != f.header:
            fail(f, "sl_%s is defined in %s: its setter and getter belong there"
                 % (m.group(2), types["sl_" + m.group(2)]))
    return bad


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    functions, types, opaque = parse(argv[1])
    if not functions:
        print("names: no SL_API declarations under %s" % argv[1])
        return 1
    names = {f.name for f in functions}
    kinds = {}
    for f in functions:
        kinds.setdefault(classify(f, names, opaque), []).append(f.name)
    bad = check(functions, types, opaque)
    for b in bad:
        print("names: " + b)
    print("names: %d public functions, %d kinds, %d violations"
          % (len(functions), len(kinds), len(bad)))
    for kind, rule in KINDS:
        members = sorted(kinds.get(kind, []))
        print("  %-12s %3d  %s" % (kind, len(members), rule))
        if "--list" in argv[2:]:
            for n in members:
                print("                    " + n)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
