#!/usr/bin/env python3
"""gpu_gpt2.py — bench/gpu.sh's gpt2 phase: GPT-2 small trained with AdamW,
ours (bench_gpt2 under schedules none, sqrt and least) beside PyTorch with
Hugging Face's GPT2LMHeadModel (bench_gpt2_torch.py, plain and gradient
checkpointing), at B=8 T=1024 and B=128 T=64, TF32 on, in interleaved
rounds: every configuration once per round, each in a process of its own,
every other round in reverse order, so that a drift of the machine during
the job falls on both sides alike.

    gpu_gpt2.py --bin BUILD/bench/bench_gpt2 --out DIR [--python PY]
                [--device cuda|cpu] [--no-tf32] [--shapes 8x1024,128x64]
                [--schedules none,sqrt,least] [--modes plain,checkpoint]
                [--rounds 3] [--steps 6] [--profile none,sqrt]
                [--budget-s S] [--timeout-s S] [--model-args "--layers 2 ..."]
                [--threads N] [--smi] [--precision f32|bf16]

Each run takes --steps steps (the first a warm-up) and reports the median
of the others with the fastest and slowest; in round 1 ours under the
--profile schedules runs one more step with every layer type and pass
timed (after the measured steps, which it does not slow). Writes into DIR:

  gpt2_runs.jsonl    every run's JSON line, with its round, start and end
  gpt2.jsonl         one line per side, schedule and shape: "model", "side"
                     ("sublinear" or "pytorch"), "schedule" (none, sqrt, least;
                     plain, checkpoint), "batch", "seq", "tf32", "ms_step" (the
                     median over the rounds of each run's median step),
                     "ms_min" and "ms_max" (the range of those per-round
                     medians), "ms_rounds" (them, in round order),
                     "step_ms_min" / "step_ms_max" (the fastest and slowest
                     single step of all rounds), "peak_MiB" (the device's free
                     memory drop, measured the same way on both sides; the
                     largest of the rounds), "device", "rounds", the cuDNN and
                     cuBLAS versions each side loaded, and per side the
                     planned memory (ours: "planned_MiB", "planned_bytes") or
                     the caching allocator's figures
                     (PyTorch); with --smi also "smi_MiB", the most memory
                     nvidia-smi saw the process hold above what the GPU held
                     when it started (its CUDA context included)
  gpt2_profile.jsonl / gpt2_profile.txt   where one of our steps goes, by
                     layer type and pass
  gpt2_versions.txt  the device and the libraries each side loaded
  gpt2.log           every run's command line and its stderr

--precision bf16: ours under --precision bf16 (bf16 activations), PyTorch
under --autocast (torch.autocast's bfloat16); every file above is then
named gpt2_bf16* instead of gpt2* (gpt2_bf16.jsonl, ...), and its lines
carry "precision".

--budget-s S: the phase stops starting runs once the next one (timed by
that configuration's run in round 1) would end more than S seconds after
the phase began (default: no limit; gpu.sh passes what is left of its
own budget). Round 1 always runs whole; a configuration cut short says so
in "rounds". Both sides get --threads (all cores): GPT-2 small's random
initialisation runs on the CPU (about 8 CPU-seconds on either side).

Expected duration, from today's figures on an H100 (issue 31): ours 2.9
s a step at B=8 T=1024 (sqrt 3.3, least about 4: it recomputes 120 % of
a step's FLOPs), 1.8 s at B=128 T=64, PyTorch 0.09-0.11 s; a run of ours
costs about 3 s of start-up (context, weights, planning; least's search
a few seconds more) plus its steps, one of PyTorch's about 10 s (imports,
model, first step). With 6 steps a run a round is then about 160 s (ours
~120, PyTorch ~40) and three rounds take 8 minutes: at today's speed give
the phase a budget and it stops after round 2. At the issue's targets
(ours <= 0.6x PyTorch: under 0.1 s a step) a round is about 70 s (ours
~30, PyTorch ~40), three take 3.5 minutes.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1048576.0


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="bench_gpt2")
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter with torch and transformers")
    ap.add_argument("--torch-script", default=os.path.join(HERE, "bench_gpt2_torch.py"))
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--no-tf32", dest="tf32", action="store_false")
    ap.add_argument("--shapes", default="8x1024,128x64", help="BxT,...")
    ap.add_argument("--schedules", default="none,sqrt,least", help="ours")
    ap.add_argument("--modes", default="plain,checkpoint", help="PyTorch's")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6, help="per run, the warm-up included")
    ap.add_argument("--profile", default="none,sqrt",
                    help="our schedules profiled in round 1 ('' for none)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="0: no limit")
    ap.add_argument("--timeout-s", type=float, default=240.0, help="per run")
    ap.add_argument("--model-args", default="", help="extra arguments of both benches")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="CPU threads of both sides (all cores: the weights' random "
                         "initialisation runs on them)")
    ap.add_argument("--smi", action="store_true", help="sample nvidia-smi's memory.used")
    ap.add_argument("--precision", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--llmc", default="",
                    help="llm.c's train_gpt2cu, built by the user: a third side (bf16 only)")
    ap.add_argument("--llmc-extra", default="", help="more train_gpt2cu options")
    a = ap.parse_args(argv)
    a.prefix = "gpt2" if a.precision == "f32" else "gpt2_bf16"

    a.shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",") if s]
    a.schedules = [s for s in a.schedules.split(",") if s]
    a.modes = [s for s in a.modes.split(",") if s]
    a.profile = [s for s in a.profile.split(",") if s]
    if a.device == "cpu":
        a.tf32 = False
    return a


def configurations(a):
    """(key, side, schedule, batch, seq) of every run of a round, in order."""
    out = []
    for b, t in a.shapes:
        for s in a.schedules:
            out.append(("ours %s B=%d T=%d" % (s, b, t), "sublinear", s, b, t))
        for m in a.modes:
            out.append(("pytorch %s B=%d T=%d" % (m, b, t), "pytorch", m, b, t))
        if a.llmc and a.precision == "bf16":
            out.append(("llm.c B=%d T=%d" % (b, t), "llmc", "plain", b, t))
    return out


def command(a, side, sched, b, t, profile):
    common = a.model_args.split() + ["--batch", str(b), "--seq", str(t),
                                     "--steps", str(a.steps), "--device", a.device,
                                     "--threads", str(a.threads), "--json"]
    if a.tf32:
        common.append("--tf32")
    if side == "sublinear":
        return ([a.bin, "--schedule", sched, "--precision", a.precision] + common +
                (["--profile"] if profile else []))
    if side == "llmc":
        return [a.python, os.path.join(HERE, "bench_gpt2_llmc.py"), "cuda", "--bin", a.llmc,
                "--batch", str(b), "--seq", str(t), "--steps", str(a.steps), "--json"] + (
                    ["--extra", a.llmc_extra] if a.llmc_extra else [])
    return ([a.python, a.torch_script, "--mode", sched] + common +
            (["--autocast"] if a.precision == "bf16" else []))


def last_json(text):
    """The last line of text that reads as a JSON object, or None."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def run_one(a, cfg, rnd, log):
    key, side, sched, b, t = cfg
    profile = rnd == 1 and side == "sublinear" and sched in a.profile
    cmd = command(a, side, sched, b, t, profile)
    log.write("== round %d: %s\n$ %s\n" % (rnd, key, " ".join(cmd)))
    log.flush()
    start = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=a.timeout_s)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        err = e.stderr if isinstance(e.stderr, str) else (e.stderr or b"").decode(errors="replace")
        err += "\ntimed out after %.0f s" % a.timeout_s
        rc = 124
    end = time.time()
    log.write(err)
    log.flush()
    r = last_json(out) if rc == 0 else None
    if r is None:
        tail = [x for x in err.strip().splitlines() if x.strip()]
        r = {"error": tail[-1] if tail else "exit status %d" % rc}
    r.update(key=key, side=side, schedule=sched, batch=b, seq=t, round=rnd, rc=rc,
             started=round(start, 3), ended=round(end, 3), wall_s=round(end - start, 2))
    return r


def fmt_run(r):
    if "error" in r or "skipped" in r:
        return "%s: %s" % (r["key"], r.get("error", r.get("skipped")))
    return "%s: %.1f ms/step (%.1f-%.1f), peak %.0f MiB, %.1f s wall" % (
        r["key"], r["ms_step"], r["ms_min"], r["ms_max"], r["peak_MiB"], r["wall_s"])


def run_rounds(a, log, runs_file):
    """Every configuration, a.rounds times, within the budget; the runs."""
    cfgs = configurations(a)
    t0 = time.time()
    first_wall = {}
    runs = []
    stopped = None
    for rnd in range(1, a.rounds + 1):
        order = cfgs if rnd % 2 else list(reversed(cfgs))
        for cfg in order:
            need = first_wall.get(cfg[0], 0.0)
            if rnd > 1 and a.budget_s > 0 and time.time() - t0 + need > a.budget_s:
                stopped = ("round %d, before %s: %.0f s of the %.0f s budget gone, its run takes "
                           "about %.0f s" % (rnd, cfg[0], time.time() - t0, a.budget_s, need))
                break
            r = run_one(a, cfg, rnd, log)
            first_wall.setdefault(cfg[0], r["wall_s"])
            runs.append(r)
            runs_file.write(json.dumps(r) + "\n")
            runs_file.flush()
            print("gpt2: round %d: %s" % (rnd, fmt_run(r)), flush=True)
        if stopped:
            print("gpt2: stopped at " + stopped, flush=True)
            break
    return runs, stopped


def smi_samples(path):
    """(epoch seconds, MiB used) of nvidia-smi's log."""
    out = []
    try:
        for line in open(path):
            parts = [x.strip() for x in line.split(",")]
            if len(parts) < 2:
                continue
            try:
                ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                out.append((ts, float(parts[1])))
            except ValueError:
                continue
    except OSError:
        pass
    return out


def smi_peak(samples, r):
    """What nvidia-smi saw run r hold: its window's most less its least."""
    w = [m for ts, m in samples if r["started"] <= ts <= r["ended"]]
    return max(w) - min(w) if len(w) >= 2 else None


VERSION_KEYS = ("device", "cudart", "cudnn", "cublas", "cublaslt")


def aggregate(a, runs, stopped, samples):
    """One row per configuration from its runs."""
    rows = []
    for key, side, sched, b, t in configurations(a):
        mine = [r for r in runs if r["key"] == key]
        good = [r for r in mine if "error" not in r and "skipped" not in r]
        row = {"model": None, "side": side, "schedule": sched, "batch": b, "seq": t,
               "tf32": a.tf32, "precision": a.precision, "rounds": len(good),
               "runs": len(mine)}
        if not good:
            bad = [r.get("error", r.get("skipped")) for r in mine]
            row.update(error=bad[-1] if bad else "not run", ms_step=None, peak_MiB=None)
            rows.append(row)
            continue
        ms = [r["ms_step"] for r in good]
        first = good[0]
        row.update(model=first.get("model"), device=first.get("device"),
                   ms_step=round(statistics.median(ms), 3), ms_min=min(ms), ms_max=max(ms),
                   ms_rounds=ms, step_ms_min=min(r["ms_min"] for r in good),
                   step_ms_max=max(r["ms_max"] for r in good),
                   peak_MiB=max(r["peak_MiB"] for r in good),
                   peak_MiB_rounds=[r["peak_MiB"] for r in good],
                   peak_source=first.get("peak_source"), steps=a.steps,
                   wall_s_rounds=[r["wall_s"] for r in good])
        for k in VERSION_KEYS[1:]:
            row[k] = first.get(k)
        if side == "sublinear":
            row.update(planned_MiB=round(first["planned_total"] / MIB, 1),
                       planned_bytes=first["planned_total"],
                       budget_MiB=round(first.get("budget_bytes", 0) / MIB, 1),
                       recompute_fraction=first.get("recompute_fraction"))
        else:
            row.update(torch=first.get("torch"), transformers=first.get("transformers"),
                       attention=first.get("attention"))
            if "max_allocated" in first:
                row.update(max_allocated_MiB=round(max(r["max_allocated"] for r in good) / MIB, 1),
                           max_reserved_MiB=round(max(r["max_reserved"] for r in good) / MIB, 1),
                           matmul_allow_tf32=first.get("matmul_allow_tf32"),
                           cudnn_allow_tf32=first.get("cudnn_allow_tf32"))
        if samples:
            seen = [p for p in (smi_peak(samples, r) for r in good) if p is not None]
            row["smi_MiB"] = max(seen) if seen else None
        if len(good) < len(mine):
            row["errors"] = [r.get("error", r.get("skipped")) for r in mine if r not in good]
        if len(good) < a.rounds:
            row["short"] = stopped or "runs failed"
        rows.append(row)
    return rows


def write_profiles(a, runs):
    """Our profiled runs: gpt2_profile.jsonl and a table per run."""
    prof = [r for r in runs if r.get("profile")]
    with open(os.path.join(a.out, a.prefix + "_profile.jsonl"), "w") as f:
        for r in prof:
            f.write(json.dumps({k: r.get(k) for k in ("model", "schedule", "batch", "seq", "tf32",
                                                      "device", "ms_step", "profile_steps",
                                                      "profile")}) + "\n")
    lines = []
    for r in prof:
        total = sum(e["s_per_step"] for e in r["profile"]) or 1.0
        lines.append("ours %s, B=%d T=%d on %s: one profiled step (each program step waited for) "
                     "%.1f ms, the measured steps' median %.1f ms" % (
                         r["schedule"], r["batch"], r["seq"], r.get("device"), 1e3 * total,
                         r["ms_step"]))
        by_type = {}
        for e in r["profile"]:
            by_type[e["layer"]] = by_type.get(e["layer"], 0.0) + e["s_per_step"]
        lines.append("  by layer type: " + ", ".join(
            "%s %.1f ms (%.0f%%)" % (k, 1e3 * v, 100 * v / total)
            for k, v in sorted(by_type.items(), key=lambda kv: -kv[1])))
        for e in r["profile"]:
            lines.append("  %-24s %-10s %6d calls %9.2f ms %5.1f%%" % (
                e["layer"], e["pass"], e["calls"], 1e3 * e["s_per_step"],
                100 * e["s_per_step"] / total))
        lines.append("")
    with open(os.path.join(a.out, a.prefix + "_profile.txt"), "w") as f:
        f.write("\n".join(lines))
    return lines


def write_versions(a, runs):
    seen, lines = set(), []
    for r in runs:
        if "error" in r or "skipped" in r or r["side"] in seen:
            continue
        seen.add(r["side"])
        lines.append("%s: %s" % (r["side"], ", ".join(
            "%s %s" % (k, r.get(k)) for k in VERSION_KEYS if k in r)))
        if r["side"] == "pytorch":
            lines.append("  torch %s, transformers %s, attention %s, matmul_allow_tf32 %s, "
                         "cudnn_allow_tf32 %s" % (r.get("torch"), r.get("transformers"),
                                                  r.get("attention"), r.get("matmul_allow_tf32"),
                                                  r.get("cudnn_allow_tf32")))
        for path in r.get("gpu_libs") or []:
            lines.append("  loaded " + path)
    with open(os.path.join(a.out, a.prefix + "_versions.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(a.out, exist_ok=True)
    smi = None
    smi_path = os.path.join(a.out, "gpt2_smi.csv")
    if a.smi:
        try:
            smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,memory.used",
                                    "--format=csv,noheader,nounits", "-lms", "100"],
                                   stdout=open(smi_path, "w"), stderr=subprocess.DEVNULL)
        except OSError as e:
            print("gpt2: no nvidia-smi (%s): smi_MiB not measured" % e, flush=True)
    print("gpt2: %d configurations (%s) x %d rounds, %d steps a run, on %s%s%s" % (
        len(configurations(a)), ", ".join("B=%d T=%d" % bt for bt in a.shapes), a.rounds,
        a.steps, a.device, ", TF32" if a.tf32 else "",
        ", budget %.0f s" % a.budget_s if a.budget_s > 0 else ""), flush=True)
    with open(os.path.join(a.out, a.prefix + ".log"), "a") as log, \
            open(os.path.join(a.out, a.prefix + "_runs.jsonl"), "a") as runs_file:
        runs, stopped = run_rounds(a, log, runs_file)
    if smi:
        smi.terminate()
        smi.wait()
    rows = aggregate(a, runs, stopped, smi_samples(smi_path) if smi else [])
    with open(os.path.join(a.out, a.prefix + ".jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    for line in write_versions(a, runs) + write_profiles(a, runs):
        print("gpt2: " + line if line else "", flush=True)
    sys.path.insert(0, HERE)
    import gpu_table
    print("\n".join(gpu_table.gpt2_tables(rows)), flush=True)
    return 0 if any(r.get("rounds") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
