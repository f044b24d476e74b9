#!/usr/bin/env python3
"""names_selftest.py - proves that tests/names.py fails on the drifts it
is meant to reject: headers that follow every rule pass, and the same
headers with one bad declaration added fail, naming that function and the
rule it breaks (a setter without set_, a get_, an _ex, a positional
variant, a layer named with a verb, a misnamed options preset, a count
that is not a _count, a file call without its verb, a typed property
declared away from its type, a constructor without a free, an on/off
switch that is not a setter).

Usage: names_selftest.py
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import names  # noqa: E402

FAILURES = []

CORE = """
#define SL_API
typedef enum sl_status { SL_OK = 0 } sl_status;
typedef struct sl_shape { int n, c, h, w; } sl_shape;
SL_API const char *sl_last_error(void);
SL_API sl_status sl_set_error(sl_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
typedef struct sl_context_options { int threads; } sl_context_options;
typedef struct sl_context sl_context;
SL_API sl_context_options sl_context_defaults(void);
SL_API sl_status sl_context_create(const sl_context_options *opts, sl_context **out);
SL_API void sl_context_free(sl_context *ctx);
"""

NET = """
#include "sublinear/core.h"
typedef struct sl_layer sl_layer;
typedef struct sl_net sl_net;
typedef enum sl_mode { SL_MODE_TRAIN = 0 } sl_mode;
typedef struct sl_conv2d_options { int in_channels, out_channels; } sl_conv2d_options;
typedef struct sl_optimizer_options { float lr; } sl_optimizer_options;
typedef struct sl_net_info { int layers; } sl_net_info;
SL_API sl_layer *sl_conv2d(int in_channels, int out_channels);
SL_API sl_layer *sl_conv2d_with(const sl_conv2d_options *opts);
SL_API sl_layer *sl_maxpool2d(int kernel, int stride, int pad);
SL_API void sl_layer_free(sl_layer *layer);
SL_API sl_status sl_sequential(sl_context *ctx, int in_channels, sl_net **out);
SL_API void sl_net_free(sl_net *net);
SL_API sl_status sl_net_add(sl_net *net, const char *name, sl_layer *layer);
SL_API int sl_net_layer_count(const sl_net *net);
SL_API sl_status sl_net_param_count(sl_net *net, int *count);
SL_API sl_status sl_net_set_mode(sl_net *net, sl_mode mode);
SL_API sl_mode sl_net_mode(const sl_net *net);
SL_API sl_status sl_net_set_memory_check(sl_net *net, int enabled);
SL_API sl_status sl_net_get_info(const sl_net *net, sl_net_info *out);
SL_API sl_status sl_net_prepare(sl_net *net, sl_shape input, sl_mode mode);
SL_API sl_optimizer_options sl_optimizer_sgd(float lr, float momentum);
SL_API sl_status sl_save_model(sl_net *net, const char *path);
SL_API sl_status sl_net_write_dot(sl_net *net, const char *path);
"""

MEMORY = """
#include "sublinear/net.h"
SL_API sl_status sl_net_set_memory_reuse(sl_net *net, int enabled);
"""

# (what, header it goes into, declaration, fragment of the expected message)
BAD = [
    ("a setter without set_", "memory.h",
     "SL_API sl_status sl_net_plan_ranks(sl_net *net, int ranks, int shard);",
     "sl_net_plan_ranks (sublinear/memory.h): takes the sl_net and plain values"),
    ("a get_ that fills no type of its name", "net.h",
     "SL_API sl_status sl_net_get_shape(const sl_net *net, sl_shape *out);",
     "sl_net_get_shape (sublinear/net.h): getters are sl_<noun>_<what>, without get_"),
    ("a getter of a plain value with get_", "net.h",
     "SL_API int sl_net_get_layers(const sl_net *net);",
     "sl_net_get_layers (sublinear/net.h): getters are"),
    ("an _ex variant", "net.h",
     "SL_API sl_layer *sl_conv2d_ex(const sl_conv2d_options *opts);",
     "sl_conv2d_ex (sublinear/net.h): no _ex variants"),
    ("a positional variant", "net.h",
     "SL_API sl_layer *sl_maxpool2d_ceil(int kernel, int stride, int pad);",
     "sl_maxpool2d_ceil (sublinear/net.h): a variant of sl_maxpool2d adds _with"),
    ("a _with variant without an options struct", "net.h",
     "SL_API sl_layer *sl_maxpool2d_with(int kernel, int stride, int pad, int ceil_mode);",
     "sl_maxpool2d_with (sublinear/net.h): a _with variant takes its choices"),
    ("a layer named with a verb", "net.h",
     "SL_API sl_layer *sl_join_add(void);",
     "sl_join_add (sublinear/net.h): a layer constructor is named after the layer"),
    ("an options preset outside its struct's name", "net.h",
     "SL_API sl_optimizer_options sl_adam(float lr, float beta1);",
     "sl_adam (sublinear/net.h): a preset of sl_optimizer_options is named"),
    ("defaults that take arguments", "net.h",
     "SL_API sl_optimizer_options sl_optimizer_defaults(float lr);",
     "sl_optimizer_defaults (sublinear/net.h): sl_<noun>_defaults takes no arguments"),
    ("a plural count", "net.h",
     "SL_API int sl_net_params(const sl_net *net);",
     "sl_net_params (sublinear/net.h): a number of things is sl_<noun>_<thing>_count"),
    ("a length for a count", "net.h",
     "SL_API int sl_net_length(const sl_net *net);",
     "sl_net_length (sublinear/net.h): a number of things"),
    ("a count returned a third way", "net.h",
     "SL_API sl_status sl_net_step_count(const sl_net *net, int64_t *steps, int flags);",
     "sl_net_step_count (sublinear/net.h): a count returns a plain integer"),
    ("a file call without its verb", "memory.h",
     "SL_API sl_status sl_net_svg(sl_net *net, const char *path);",
     "sl_net_svg (sublinear/memory.h): a call that takes a file names its verb"),
    ("a typed property away from its type", "memory.h",
     "SL_API sl_status sl_net_set_shape(sl_net *net, sl_shape shape);",
     "sl_net_set_shape (sublinear/memory.h): sl_shape is defined in sublinear/core.h"),
    ("a setter of another object", "net.h",
     "SL_API sl_status sl_net_set_threads(sl_context *ctx, int threads);",
     "sl_net_set_threads (sublinear/net.h): sl_<noun>_set_<what> takes the sl_net"),
    ("a constructor without a free", "net.h",
     "typedef struct sl_widget sl_widget;\n"
     "SL_API sl_status sl_widget_create(int size, sl_widget **out);",
     "sl_widget_create (sublinear/net.h): makes an sl_widget but there is no sl_widget_free"),
    ("a constructor named after another noun", "net.h",
     "SL_API sl_status sl_make_context(sl_context **out);",
     "sl_make_context (sublinear/net.h): a constructor of sl_context is named sl_context_<how>"),
    ("a constructor whose object is not last", "net.h",
     "SL_API sl_status sl_context_open(sl_context **out, const char *name);",
     "sl_context_open (sublinear/net.h): the new object (sl_context **out) is the last"),
    ("an on/off switch that is not a setter", "net.h",
     "SL_API sl_status sl_net_freeze_batchnorm(sl_net *net, int frozen, int *count);",
     "sl_net_freeze_batchnorm (sublinear/net.h): switches frozen on and off"),
    ("a free of the wrong name", "net.h",
     "SL_API void sl_net_release_free(sl_net *net);",
     "sl_net_release_free (sublinear/net.h): frees an sl_net: name it sl_net_free"),
]


def expect(what, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else "\n     " + detail))
    if not cond:
        FAILURES.append(what)


def write_tree(root, extra_header=None, extra=""):
    inc = os.path.join(root, "include")
    os.makedirs(os.path.join(inc, "sublinear"), exist_ok=True)
    files = {"core.h": CORE, "net.h": NET, "memory.h": MEMORY}
    if extra_header:
        files[extra_header] += "\n" + extra + "\n"
    for name, text in files.items():
        with open(os.path.join(inc, "sublinear", name), "w", encoding="utf-8") as f:
            f.write("/* sublinear/%s */\n%s" % (name, text))
    with open(os.path.join(inc, "sublinear.h"), "w", encoding="utf-8") as f:
        f.write('#include "sublinear/core.h"\n#include "sublinear/net.h"\n')
    return inc


def violations(inc):
    functions, types, opaque = names.parse(inc)
    return functions, names.check(functions, types, opaque)


def main():
    with tempfile.TemporaryDirectory(prefix="sl_names_") as tmp:
        functions, bad = violations(write_tree(os.path.join(tmp, "good")))
        expect("headers that follow every rule pass (%d functions)" % len(functions),
               not bad and len(functions) == 23, "\n     ".join(bad))
        expect("the kinds are told apart",
               names.main(["names.py", os.path.join(tmp, "good", "include")]) == 0)
        for i, (what, header, decl, fragment) in enumerate(BAD):
            _, bad = violations(write_tree(os.path.join(tmp, "bad%d" % i), header, decl))
            expect("fails on %s" % what, any(fragment in b for b in bad),
                   "wanted '%s' among:\n     %s" % (fragment, "\n     ".join(bad) or "(none)"))
        # The command's exit status, on one of them.
        expect("exits 1 on a violation",
               names.main(["names.py", os.path.join(tmp, "bad0", "include")]) == 1)
    if FAILURES:
        print("names_selftest: %d check(s) failed" % len(FAILURES))
        return 1
    print("names_selftest: names.py catches all %d drifts" % len(BAD))
    return 0


if __name__ == "__main__":
    sys.exit(main())
