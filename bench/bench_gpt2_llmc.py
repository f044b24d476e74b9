#!/usr/bin/env python3
"""bench_gpt2_llmc.py — llm.c's side of bench_gpt2.c, for a train_gpt2
binary the user built from karpathy/llm.c themselves (this project holds
none of its code and does not build it).

    bench_gpt2_llmc.py run --bin PATH [--steps 4] [--threads 2] [--seed 0] [--json]
    bench_gpt2_llmc.py formula --batch B --seq T [--json]

`run` writes llm.c's inputs, in its documented formats (data, not code),
into a scratch folder and runs the binary there:

  - gpt2_124M.bin: 256 int32 of header (magic 20240326, version 3, maxT
    1024, V 50257, L 12, NH 12, C 768, padded V 50304), then the float32
    parameters in llm.c's order (wte [Vp, C], wpe, ln1w, ln1b, qkvw, qkvb,
    attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw,
    lnfb), seeded random (normal, std 0.02; LayerNorm weights 1, biases 0;
    the padded rows of wte 0);
  - dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin, the token
    shards train_gpt2.c opens first: 256 int32 of header (magic 20240520,
    version 1, token count), then uint16 random token ids.

train_gpt2 trains at its built-in B = 4, T = 64 (AdamW, lr 1e-4, weight
decay 0) and prints "step N: train loss X (took Y ms)" per step; this
script reads --steps of those lines (the first, step 0, is the warm-up:
llm.c allocates its gradients and AdamW moments there), then stops the
program (its remaining 40 steps and its sampling are not needed) and
reports the median of the others and the child's peak RSS (wait4).

`cuda` does the same for llm.c's mixed-precision `train_gpt2cu` (bf16
activations and GEMMs, fp32 master weights), started from scratch as GPT-2
small (`-e d12`) at --batch x --seq with no gradient accumulation, no
sampling, no checkpoints and one validation batch: it writes the two token
shards (enough tokens for every step) and passes them with -i / -j, reads
"step N/M | ... | X ms" per step (the first is the warm-up), and reports
the median of the others, their range, and the device memory the process
held at its most as nvidia-smi's per-process figure sampled every 100 ms
(its CUDA context included), beside what llm.c itself prints after its
allocations ("device memory usage").

`formula` prints llm.c's memory at any B, T from its fill_in_*_sizes
(train_gpt2.c): activations, the same again for their gradients,
parameters, gradients and AdamW's two moments, with no run.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

L, NH, C, V, VP, MAXT = 12, 12, 768, 50257, 50304, 1024


def param_sizes(maxT=MAXT):
    return [VP * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
            L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C]


def activation_floats(B, T):
    """The 23 tensors of train_gpt2.c's fill_in_activation_sizes."""
    sizes = [B * T * C,                  # encoded
             L * B * T * C,              # ln1
             L * B * T, L * B * T,       # ln1_mean, ln1_rstd
             L * B * T * 3 * C,          # qkv
             L * B * T * C,              # atty
             L * B * NH * T * T,         # preatt
             L * B * NH * T * T,         # att
             L * B * T * C,              # attproj
             L * B * T * C,              # residual2
             L * B * T * C,              # ln2
             L * B * T, L * B * T,       # ln2_mean, ln2_rstd
             L * B * T * 4 * C,          # fch
             L * B * T * 4 * C,          # fch_gelu
             L * B * T * C,              # fcproj
             L * B * T * C,              # residual3
             B * T * C, B * T, B * T,    # lnf, lnf_mean, lnf_rstd
             B * T * VP, B * T * VP,     # logits, probs
             B * T]                      # losses
    return sum(sizes), 2 * L * B * NH * T * T


def formula(B, T):
    acts, tt = activation_floats(B, T)
    p = sum(param_sizes())
    return dict(impl="llm.c formula", batch=B, seq=T, activation_floats=acts,
                attention_floats=tt, activation_bytes=4 * acts,
                activation_grad_bytes=4 * acts, param_bytes=4 * p, grad_bytes=4 * p,
                adamw_bytes=8 * p, total_bytes=4 * (2 * acts + 4 * p))


def write_inputs(folder, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    with open(os.path.join(folder, "gpt2_124M.bin"), "wb") as f:
        header = np.zeros(256, dtype=np.int32)
        header[:8] = [20240326, 3, MAXT, V, L, NH, C, VP]
        f.write(header.tobytes())
        ones = {2, 8, 14}    # ln1w, ln2w, lnfw
        zeros = {3, 5, 7, 9, 11, 13, 15}  # LayerNorm and Linear biases
        for i, n in enumerate(param_sizes()):
            if i in ones:
                x = np.ones(n, dtype=np.float32)
            elif i in zeros:
                x = np.zeros(n, dtype=np.float32)
            else:
                x = (0.02 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)
                if i == 0:  # padded vocabulary rows stay 0
                    x.reshape(VP, C)[V:] = 0
            f.write(x.tobytes())
    shards = os.path.join(folder, "dev", "data", "tinyshakespeare")
    os.makedirs(shards)
    for split, ntok in (("train", 4 * 64 * 64 + 1), ("val", 4 * 64 * 8 + 1)):
        with open(os.path.join(shards, "tiny_shakespeare_%s.bin" % split), "wb") as f:
            header = np.zeros(256, dtype=np.int32)
            header[:3] = [20240520, 1, ntok]
            f.write(header.tobytes())
            f.write(rng.integers(0, V, ntok, dtype=np.uint16).tobytes())


def run(a):
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        print("bench_gpt2_llmc: %s is not an executable" % binary, file=sys.stderr)
        return 1
    folder = tempfile.mkdtemp(prefix="sl_llmc_")
    try:
        write_inputs(folder, a.seed)
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        cmd = [binary]
        if shutil.which("stdbuf"):  # line-buffered stdout through the pipe
            cmd = [shutil.which("stdbuf"), "-oL"] + cmd
        proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        times, losses, log = [], [], []
        pat = re.compile(r"step (\d+): train loss ([-0-9.naif]+) \(took ([0-9.]+) ms\)")
        for line in proc.stdout:
            log.append(line.rstrip())
            if not a.json:
                print("llm.c: " + line.rstrip(), flush=True)
            m = pat.search(line)
            if m:
                times.append(float(m.group(3)) / 1000.0)
                losses.append(float(m.group(2)))
                if len(times) >= a.steps:
                    proc.send_signal(signal.SIGTERM)
                    break
        proc.stdout.close()
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = 0  # reaped here
        if len(times) < a.steps:
            print("bench_gpt2_llmc: train_gpt2 stopped after %d step(s) (status %d):\n%s"
                  % (len(times), status, "\n".join(log[-15:])), file=sys.stderr)
            return 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    measured = times[1:] if len(times) > 1 else times
    res = dict(impl="llm.c", binary=binary, batch=4, seq=64, threads=a.threads,
               steps=len(times), s_per_step=statistics.median(measured), warmup_s=times[0],
               peak_rss=ru.ru_maxrss * 1024, first_loss=losses[0], last_loss=losses[-1],
               formula=formula(4, 64))
    if a.json:
        print(json.dumps(res))
    else:
        print("llm.c train_gpt2, B=4 T=64: %.3f s/step (median of %d after a %.3f s warm-up), "
              "peak RSS %.1f MiB" % (res["s_per_step"], len(measured), times[0],
                                     res["peak_rss"] / 1048576.0))
    return 0


def write_shards(folder, seed, train_tokens, val_tokens):
    """llm.c's two token shards, uint16 random ids; their paths."""
    import numpy as np
    rng = np.random.default_rng(seed)
    paths = []
    for split, ntok in (("train", train_tokens), ("val", val_tokens)):
        path = os.path.join(folder, "%s.bin" % split)
        with open(path, "wb") as f:
            header = np.zeros(256, dtype=np.int32)
            header[:3] = [20240520, 1, ntok]
            f.write(header.tobytes())
            f.write(rng.integers(0, V, ntok, dtype=np.uint16).tobytes())
        paths.append(path)
    return paths


def smi_process_peak(path, pid):
    """The most MiB nvidia-smi's per-process log shows for pid, or None."""
    best = None
    try:
        for line in open(path):
            parts = [x.strip() for x in line.split(",")]
            if len(parts) >= 2 and parts[0] == str(pid):
                try:
                    best = max(best or 0.0, float(parts[1]))
                except ValueError:
                    pass
    except OSError:
        pass
    return best


def run_cuda(a):
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        print("bench_gpt2_llmc: %s is not an executable" % binary, file=sys.stderr)
        return 1
    B, T = a.batch, a.seq
    folder = tempfile.mkdtemp(prefix="sl_llmc_cuda_")
    smi = None
    try:
        train, val = write_shards(folder, a.seed, B * T * (a.steps + 2) + 1, B * T + 1)
        cmd = [binary, "-e", "d12", "-b", str(B), "-t", str(T), "-d", str(B * T),
               "-x", str(a.steps), "-v", "1000000", "-m", "1", "-s", "0", "-n", "0",
               "-h", "0", "-i", train, "-j", val] + a.extra.split()
        if shutil.which("stdbuf"):
            cmd = [shutil.which("stdbuf"), "-oL"] + cmd
        print("bench_gpt2_llmc: $ " + " ".join(cmd), file=sys.stderr, flush=True)
        smi_path = os.path.join(folder, "smi.csv")
        if shutil.which("nvidia-smi"):
            smi = subprocess.Popen(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                    "--format=csv,noheader,nounits", "-lms", "100"],
                                   stdout=open(smi_path, "w"), stderr=subprocess.DEVNULL)
        proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        times, losses, log, reported, device = [], [], [], None, None
        pat = re.compile(r"step\s+(\d+)/(\d+) \| loss ([-0-9.naif]+) .*\| ([0-9.]+) ms \|")
        for line in proc.stdout:
            log.append(line.rstrip())
            print("llm.c: " + line.rstrip(), file=sys.stderr, flush=True)
            m = pat.search(line)
            if m:
                times.append(float(m.group(4)))
                losses.append(float(m.group(3)))
            m = re.search(r"device memory usage: (\d+) MiB", line)
            if m:
                reported = int(m.group(1))
            m = re.search(r"\|\s*device\s*\|\s*(.*?)\s*\|", line, re.I)
            if m and device is None:
                device = m.group(1)
        rc = proc.wait()
        if smi:
            smi.terminate()
            smi.wait()
        peak = smi_process_peak(smi_path, proc.pid)
        if len(times) < 2:
            print("bench_gpt2_llmc: train_gpt2cu gave %d step(s) (exit status %d):\n%s"
                  % (len(times), rc, "\n".join(log[-15:])), file=sys.stderr)
            return 1
    finally:
        if smi and smi.poll() is None:
            smi.terminate()
        shutil.rmtree(folder, ignore_errors=True)
    measured = times[1:]
    res = dict(impl="llm.c", side="llmc", binary=binary, batch=B, seq=T, precision="bf16",
               device=device, steps=len(times), ms_step=statistics.median(measured),
               ms_min=min(measured), ms_max=max(measured), warmup_ms=times[0],
               peak_MiB=peak if peak is not None else reported,
               peak_source="nvidia-smi per process" if peak is not None else
               "llm.c's device memory usage", llmc_reported_MiB=reported,
               first_loss=losses[0], last_loss=losses[-1], argv=cmd)
    print(json.dumps(res) if a.json else
          "llm.c train_gpt2cu, B=%d T=%d: %.1f ms/step (%.1f-%.1f), peak %s MiB" % (
              B, T, res["ms_step"], res["ms_min"], res["ms_max"], res["peak_MiB"]))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--bin", required=True)
    r.add_argument("--steps", type=int, default=4)
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true")
    c = sub.add_parser("cuda")
    c.add_argument("--bin", required=True, help="llm.c's train_gpt2cu")
    c.add_argument("--batch", type=int, default=8)
    c.add_argument("--seq", type=int, default=1024)
    c.add_argument("--steps", type=int, default=6)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--extra", default="", help="more train_gpt2cu options")
    c.add_argument("--json", action="store_true")
    c.add_argument("--threads", type=int, default=0, help="ignored (gpu_gpt2.py passes it)")
    c.add_argument("--device", default="cuda", help="ignored")
    f = sub.add_parser("formula")
    f.add_argument("--batch", type=int, required=True)
    f.add_argument("--seq", type=int, required=True)
    f.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.cmd == "formula":
        res = formula(a.batch, a.seq)
        if a.json:
            print(json.dumps(res))
        else:
            M = 1048576.0
            print("llm.c at B=%d T=%d: activations %.1f MiB (%d floats, of which %d in the "
                  "two T x T attention tensors) + the same for their gradients, parameters "
                  "%.1f, gradients %.1f, AdamW %.1f: %.1f MiB" % (
                      a.batch, a.seq, res["activation_bytes"] / M, res["activation_floats"],
                      res["attention_floats"], res["param_bytes"] / M, res["grad_bytes"] / M,
                      res["adamw_bytes"] / M, res["total_bytes"] / M))
        return 0
    if a.cmd == "cuda":
        return run_cuda(a)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
