#!/usr/bin/env python3
"""Turns the JSON lines bench/gpu.sh writes (gpt2.jsonl, ours.jsonl,
torch.jsonl, maxbatch.jsonl, profile.jsonl in one folder) into the
Markdown tables of bench/RESULTS.md: GPT-2 small beside PyTorch (medians
and ranges of interleaved rounds, issue 31's targets as ratios), ResNet
step time and peak memory for TF32 off and on, the issue's targets as
ratios, the largest batch in 16 GiB, and where a step's time goes. Every
ratio comes from runs of one job on one machine.

    gpu_table.py [FOLDER] [--only gpt2]
"""
import argparse
import json
import re
import os
import statistics
import sys

MIB = 1024.0 * 1024.0
MEMONGER = {"plain_mib": 5459, "plain_its": 2.93, "sub_mib": 2455, "sub_its": 2.63}


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def label(r):
    if r["side"] == "sublinear":
        return "sublinear " + r["schedule"].split(":")[0]
    return "PyTorch " + r["mode"]


def step_table(ours, torch, tf32):
    """The step table of one TF32 setting: a row per run, its it/s the median
    over the rounds (gpu.sh runs them interleaved) with the range of ms/step,
    its memory the largest of the rounds."""
    rows = [r for r in ours if r.get("tf32", False) == tf32 and not r.get("max_batch_search")]
    rows += [r for r in torch if r.get("tf32", False) == tf32 and "it_per_s" in r]
    if not rows:
        return [], {}
    groups = {}
    for r in rows:
        groups.setdefault(label(r), []).append(r)
    out = ["| run | it/s | ms/step | range ms | rounds | planned peak MiB | measured peak MiB | "
           "reserved MiB | device drop MiB |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by = {}
    cell = lambda v: "—" if v is None else f"{v:.0f}"
    for name, rs in groups.items():
        its = statistics.median(r["it_per_s"] for r in rs)
        fast, slow = max(r["it_per_s"] for r in rs), min(r["it_per_s"] for r in rs)
        if rs[0]["side"] == "sublinear":
            planned = max(r["planned_total"] for r in rs) / MIB
            measured = max(r["measured_total"] for r in rs) / MIB
            reserved, drop = None, max(r["device_used"] for r in rs) / MIB
        else:
            planned, measured = None, max(r["max_allocated"] for r in rs) / MIB
            reserved = max(r["max_reserved"] for r in rs) / MIB
            drop = max(r["device_drop"] for r in rs) / MIB
        by[name] = {"its": its, "measured": measured, "drop": drop}
        span = f"{1e3 / fast:.0f}–{1e3 / slow:.0f}" if fast and slow else "—"
        out.append(f"| {name} | {its:.2f} | {1e3 / its if its else 0:.0f} | {span} | {len(rs)} | "
                   f"{cell(planned)} | {cell(measured)} | {cell(reserved)} | {cell(drop)} |")
    return out, by


def targets(by, tf32):
    out = []
    def ratio(a, b, fa, fb):
        if a in by and b in by and by[b][fb]:
            return by[a][fa] / by[b][fb]
        return None
    def line(text, value, ok):
        if value is None:
            out.append(f"- {text}: not measured")
        else:
            out.append(f"- {text}: {value:.3f} ({'met' if ok(value) else 'NOT met'})")
    # time per step ratios: ours / theirs = their it/s / our it/s (issue 31's
    # targets: <= 0.8 with TF32, <= 1.0 without; sqrt <= 1.3x keep-everything)
    bound = 0.8 if tf32 else 1.0
    line(f"our keep-everything step time / PyTorch plain (target ≤ {bound})",
         ratio("PyTorch plain", "sublinear none", "its", "its"), lambda v: v <= bound)
    line("our sqrt step time / our keep-everything (target ≤ 1.3)",
         ratio("sublinear none", "sublinear sqrt", "its", "its"), lambda v: v <= 1.3)
    ck = [k for k in by if k.startswith("PyTorch checkpoint")]
    if ck:
        line(f"our sqrt step time / {ck[0]} (target < 1.0)",
             ratio(ck[0], "sublinear sqrt", "its", "its"), lambda v: v < 1.0)
        line(f"our sqrt measured peak / {ck[0]} max_allocated (target ≤ 0.5)",
             ratio("sublinear sqrt", ck[0], "measured", "measured"), lambda v: v <= 0.5)
        line(f"our sqrt device drop / {ck[0]}'s (the same measure; target ≤ 0.5)",
             ratio("sublinear sqrt", ck[0], "drop", "drop"), lambda v: v <= 0.5)
    if "sublinear sqrt" in by:
        s = by["sublinear sqrt"]
        beat = s["measured"] < MEMONGER["sub_mib"] and s["its"] > MEMONGER["sub_its"]
        out.append(f"- memonger's sublinear point ({MEMONGER['sub_mib']} MiB at {MEMONGER['sub_its']} it/s) "
                   f"against our sqrt ({s['measured']:.0f} MiB at {s['its']:.2f} it/s): "
                   f"{'beaten on both axes' if beat else 'NOT beaten on both axes'}")
    return out


# Issue 31's GPT-2 targets: (shape, ours, theirs, what, bound).
GPT2_TARGETS = [((8, 1024), "none", "plain", "ms_step", 0.6),
                ((8, 1024), "sqrt", "checkpoint", "ms_step", 0.7),
                ((8, 1024), "none", "plain", "peak_MiB", 0.5),
                ((8, 1024), "sqrt", "checkpoint", "peak_MiB", 0.5),
                ((128, 64), "none", "plain", "ms_step", 0.6)]

# bf16 (issue 34): (shape, our schedule, other side, its run, measure, bound);
# the peak beside llm.c is nvidia-smi's on both sides (context included)
GPT2_BF16_TARGETS = [((8, 1024), "none", "llmc", "plain", "ms_step", 1.0),
                     ((8, 1024), "none", "pytorch", "plain", "ms_step", 0.5),
                     ((8, 1024), "none", "llmc", "plain", "smi_MiB", 0.6),
                     ((8, 1024), "least", "sublinear", "none", "ms_step", 1.3)]


def gpt2_tables(rows):
    """The GPT-2 table and targets from gpu_gpt2.py's rows (gpt2.jsonl)."""
    if not rows:
        return []
    ok = [r for r in rows if r.get("ms_step") is not None]
    dev = next((r["device"] for r in ok if r.get("device")), "unknown device")
    torch_v = next((r["torch"] for r in ok if r.get("torch")), None)
    tf32 = any(r.get("tf32") for r in rows)
    rounds = sorted({r["rounds"] for r in ok})
    source = next((r["peak_source"] for r in ok if r.get("peak_source")), "device free-memory drop")
    out = [f"{next((r['model'] for r in ok if r.get('model')), 'GPT-2')}, AdamW, float32 "
           f"{'with TF32' if tf32 else 'without TF32'}, on {dev}"
           f"{' beside PyTorch ' + torch_v + ' (Hugging Face GPT2LMHeadModel, SDPA)' if torch_v else ''}: "
           f"ms/step is the median over {'/'.join(map(str, rounds))} interleaved rounds of each "
           "run's median step, the range that of the rounds; peak is the " + source + " (the "
           "same measure on both sides)" + (
               ", nvidia-smi's the most the process held above the GPU's use when it started, its "
               "CUDA context included" if any(r.get("smi_MiB") for r in ok) else "") + ".", "",
           "| shape | run | ms/step | range | rounds | peak MiB | nvidia-smi MiB | planned / "
           "allocated MiB |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    cell = lambda v, f="{:.0f}": "—" if v is None else f.format(v)
    bf16 = any(r.get("precision") == "bf16" for r in rows)
    if bf16:
        out[0] = re.sub(r"float32 with(out)? TF32", "bf16 mixed precision (PyTorch: autocast)",
                        out[0], count=1)
    for r in rows:
        if r["side"] == "llmc":  # its own figure is nvidia-smi's per-process one
            r.setdefault("smi_MiB", r.get("peak_MiB"))
        who = {"sublinear": "ours ", "pytorch": "PyTorch ", "llmc": "llm.c "}[r["side"]] + \
            r["schedule"]
        shape = f"B={r['batch']} T={r['seq']}"
        if r.get("ms_step") is None:
            out.append(f"| {shape} | {who} | {str(r.get('error', 'not run')).replace('|', '/')} "
                       "| | | | | |")
            continue
        other = r.get("planned_MiB") if r["side"] == "sublinear" else r.get("max_allocated_MiB")
        out.append(f"| {shape} | {who} | {r['ms_step']:.1f} | {r['ms_min']:.1f}–{r['ms_max']:.1f} | "
                   f"{r['rounds']} | {cell(r['peak_MiB'])} | {cell(r.get('smi_MiB'))} | "
                   f"{cell(other)} |")
    out.append("")
    by = {(r["side"], r["schedule"], r["batch"], r["seq"]): r for r in ok}
    if bf16:
        for (b, t), mine, side, theirs, what, bound in GPT2_BF16_TARGETS:
            x, y = by.get(("sublinear", mine, b, t)), by.get((side, theirs, b, t))
            name = {"ms_step": "step time", "smi_MiB": "nvidia-smi peak"}[what]
            who = {"llmc": "llm.c", "pytorch": "PyTorch autocast", "sublinear": "ours"}[side]
            text = f"- B={b} T={t}: ours {mine} / {who} {theirs}, {name} (target ≤ {bound})"
            if not (x and y and x.get(what) and y.get(what)):
                out.append(text + ": not measured")
                continue
            v = x[what] / y[what]
            out.append(f"{text}: {v:.3f} ({'met' if v <= bound else 'NOT met'})")
        # our other schedules (sqrt, least:F) on the same two axes, for
        # reading beside the targets: memory against llm.c's, time
        # against our none
        for (sd, mine, b, t), x in sorted(by.items()):
            if sd != "sublinear" or mine in ("none", "least") or (b, t) != (8, 1024):
                continue
            y, z = by.get(("llmc", "plain", b, t)), by.get(("sublinear", "none", b, t))
            parts = []
            if x.get("smi_MiB") and y and y.get("smi_MiB"):
                parts.append(f"nvidia-smi peak / llm.c's {x['smi_MiB'] / y['smi_MiB']:.3f}")
            if x.get("ms_step") and z and z.get("ms_step"):
                parts.append(f"step time / ours none {x['ms_step'] / z['ms_step']:.3f}")
            if parts:
                out.append(f"- B={b} T={t}: ours {mine} (not a target's schedule): "
                           + ", ".join(parts))
        out.append("")
        return out
    for (b, t), mine, theirs, what, bound in GPT2_TARGETS:
        x, y = by.get(("sublinear", mine, b, t)), by.get(("pytorch", theirs, b, t))
        name = "step time" if what == "ms_step" else "peak"
        text = f"- B={b} T={t}: ours {mine} / PyTorch {theirs}, {name} (target ≤ {bound})"
        if not (x and y and x.get(what) and y.get(what)):
            out.append(text + ": not measured")
            continue
        v = x[what] / y[what]
        extra = ""
        if what == "peak_MiB" and x.get("smi_MiB") and y.get("smi_MiB"):
            extra = f"; by nvidia-smi {x['smi_MiB'] / y['smi_MiB']:.3f}"
        elif what == "ms_step":
            extra = (f"; slowest round of ours / fastest of theirs "
                     f"{x['ms_max'] / y['ms_min']:.3f}")
        out.append(f"{text}: {v:.3f} ({'met' if v <= bound else 'NOT met'}){extra}")
    out.append("")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?", default="gpu-out")
    ap.add_argument("--only", choices=("gpt2",))
    a = ap.parse_args()
    folder = a.folder
    for name in ("gpt2.jsonl", "gpt2_bf16.jsonl"):
        gpt2 = load(folder, name)
        if gpt2:
            print("\n".join(gpt2_tables(gpt2)))
    if a.only == "gpt2":
        return
    ours, torch = load(folder, "ours.jsonl"), load(folder, "torch.jsonl")
    dev = next((r["device"] for r in torch + ours if r.get("device")), "unknown device")
    if ours or torch:
        print(f"ResNet-152, batch 16, 224², SGD momentum, on {dev}"
              f"{' (PyTorch ' + torch[0]['torch'] + ')' if torch and 'torch' in torch[0] else ''}; "
              "it/s is the median over the rounds, the range that of their ms/step.\n")
    for tf32 in (False, True):
        table, by = step_table(ours, torch, tf32)
        if not table:
            continue
        print(f"**TF32 {'on' if tf32 else 'off (true FP32)'}**\n")
        print("\n".join(table) + "\n")
        print("\n".join(targets(by, tf32)) + "\n")
    mb = load(folder, "maxbatch.jsonl")
    if mb:
        print("**Largest batch that trains in 16 GiB** (ours: planned step ≤ 16 GiB, then one step "
              "run at that batch; PyTorch: allocator capped at 16 GiB, doubling and bisection)\n")
        print("| run | batch |\n|---|---:|")
        got = {}
        for r in mb:
            b = r.get("batch") if r["side"] == "sublinear" else r.get("max_batch")
            got[label(r)] = b
            print(f"| {label(r)} | {b} |")
        if got.get("sublinear sqrt") and got.get("PyTorch plain"):
            v = got["sublinear sqrt"] / got["PyTorch plain"]
            print(f"\n- our sqrt / PyTorch plain: {v:.2f}x (target ≥ 3: {'met' if v >= 3 else 'NOT met'})\n")
    prof = load(folder, "profile.jsonl")
    for r in prof:
        total = sum(e["ms"] for e in r["profile"]) or 1.0
        print(f"**Where a step goes: sublinear {r['schedule']}** (one profiled step, each program step "
              f"waited for: {total:.0f} ms in all)\n")
        print("| layer type | pass | calls | ms | share |\n|---|---|---:|---:|---:|")
        for e in r["profile"][:12]:
            print(f"| {e['type']} | {e['pass']} | {e['calls']} | {e['ms']:.1f} | {100 * e['ms'] / total:.1f}% |")
        print()


if __name__ == "__main__":
    main()
