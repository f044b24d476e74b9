#!/usr/bin/env python3
"""Turns the JSON lines bench/gpu.sh writes (ours.jsonl, torch.jsonl,
maxbatch.jsonl, profile.jsonl in one folder) into the Markdown tables of
bench/RESULTS.md: step time and peak memory for TF32 off and on, the
issue's targets as ratios, the largest batch in 16 GiB, and where a step's
time goes. Ratios come from one run of one job (the machine is shared)."""
import json
import os
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
    rows = [r for r in ours if r.get("tf32", False) == tf32 and not r.get("max_batch_search")]
    rows += [r for r in torch if r.get("tf32", False) == tf32 and "it_per_s" in r]
    if not rows:
        return [], {}
    out = ["| run | it/s | ms/step | planned peak MiB | measured peak MiB | reserved MiB | device drop MiB |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    by = {}
    for r in rows:
        its = r["it_per_s"]
        if r["side"] == "sublinear":
            planned, measured, reserved, drop = (r["planned_total"] / MIB, r["measured_total"] / MIB,
                                                 None, r["device_used"] / MIB)
        else:
            planned, measured, reserved, drop = (None, r["max_allocated"] / MIB,
                                                 r["max_reserved"] / MIB, r["device_drop"] / MIB)
        by[label(r)] = {"its": its, "measured": measured, "drop": drop}
        cell = lambda v: "—" if v is None else f"{v:.0f}"
        out.append(f"| {label(r)} | {its:.2f} | {1e3 / its if its else 0:.0f} | {cell(planned)} | "
                   f"{cell(measured)} | {cell(reserved)} | {cell(drop)} |")
    return out, by


def targets(by):
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
    # time per step ratios: ours / theirs = their it/s / our it/s
    line("our keep-everything step time / PyTorch plain (target ≤ 1.0)",
         ratio("PyTorch plain", "sublinear none", "its", "its"), lambda v: v <= 1.0)
    line("our sqrt step time / our keep-everything (target ≤ 1.15)",
         ratio("sublinear none", "sublinear sqrt", "its", "its"), lambda v: v <= 1.15)
    ck = [k for k in by if k.startswith("PyTorch checkpoint")]
    if ck:
        line(f"our sqrt step time / {ck[0]} (target < 1.0)",
             ratio(ck[0], "sublinear sqrt", "its", "its"), lambda v: v < 1.0)
        line(f"our sqrt measured peak / {ck[0]} max_allocated (target ≤ 0.5)",
             ratio("sublinear sqrt", ck[0], "measured", "measured"), lambda v: v <= 0.5)
    if "sublinear sqrt" in by:
        s = by["sublinear sqrt"]
        beat = s["measured"] < MEMONGER["sub_mib"] and s["its"] > MEMONGER["sub_its"]
        out.append(f"- memonger's sublinear point ({MEMONGER['sub_mib']} MiB at {MEMONGER['sub_its']} it/s) "
                   f"against our sqrt ({s['measured']:.0f} MiB at {s['its']:.2f} it/s): "
                   f"{'beaten on both axes' if beat else 'NOT beaten on both axes'}")
    return out


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "gpu-out"
    ours, torch = load(folder, "ours.jsonl"), load(folder, "torch.jsonl")
    dev = next((r["device"] for r in torch if "device" in r), "unknown device")
    print(f"ResNet-152, batch 16, 224², SGD momentum, on {dev}"
          f"{' (PyTorch ' + torch[0]['torch'] + ')' if torch and 'torch' in torch[0] else ''}.\n")
    for tf32 in (False, True):
        table, by = step_table(ours, torch, tf32)
        if not table:
            continue
        print(f"**TF32 {'on' if tf32 else 'off (true FP32)'}**\n")
        print("\n".join(table) + "\n")
        print("\n".join(targets(by)) + "\n")
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
