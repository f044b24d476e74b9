#!/usr/bin/env python3
"""bench_gpu_gpt2.py — bench/gpu_gpt2.py (bench/gpu.sh's gpt2 phase) without a
GPU (registered in ctest as test_bench_gpu_gpt2).

    bench_gpu_gpt2.py BENCH_DIR BUILD_DIR

1. On stand-ins for bench_gpt2 and bench_gpt2_torch.py that print the JSON
   the real ones print, with each configuration's step time growing by 1 ms
   a run: every configuration runs once a round, in alternating order over
   3 rounds; gpt2.jsonl holds one line per side, schedule and shape with the
   median and range of the rounds' medians, the largest peak, the versions;
   the profile and versions files are written; the targets of issue 31 are
   judged (one met, one not); a budget stops the phase in round 2 and the
   rows say so; nvidia-smi's log is read into per-run peaks.
2. With the real bench_gpt2 (--device cpu, a tiny GPT-2) and the real
   bench_gpt2_torch.py under this interpreter (SKIPPED without
   transformers): the phase runs end to end with the arguments it passes,
   and again with --precision bf16 (ours in bf16, PyTorch under autocast)
   into gpt2_bf16.jsonl.
3. bench/gpu.sh's gpt2, resnet and table phases on stand-ins (a build
   folder of fake programs, a fake interpreter for the PyTorch scripts):
   the gpt2 phase gets its arguments through, the ResNet configurations
   run in interleaved rounds with each line's round, and the tables show
   medians over the rounds.
4. bench_gpt2 --device cuda: without a GPU it fails at once, naming the
   device; with one it runs the tiny GPT-2 and names the device and cuDNN.
"""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time

COST = {"none": 50.0, "sqrt": 90.0, "least": 120.0, "plain": 100.0, "checkpoint": 110.0}
PEAK = {"none": 7000.0, "sqrt": 3800.0, "least": 2500.0, "plain": 16000.0, "checkpoint": 8000.0}

FAKE = r'''#!/usr/bin/env python3
import json, os, sys, time
a = sys.argv[1:]
torch = bool(a) and a[0].endswith("bench_gpt2_torch.py")
if torch:
    a = a[1:]
opt = lambda k: a[a.index(k) + 1]
cfg = opt("--mode" if torch else "--schedule")
b, t = int(opt("--batch")), int(opt("--seq"))
name = "%s_%d_%d" % (cfg, b, t)
count = os.path.join(os.environ["FAKE_DIR"], name)
n = int(open(count).read()) if os.path.exists(count) else 0
open(count, "w").write(str(n + 1))
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
cost = json.loads(os.environ["FAKE_COST"])[cfg] * (1 if b == 8 else 0.5) + n
peak = json.loads(os.environ["FAKE_PEAK"])[cfg]
d = dict(model="gpt2-small", side="pytorch" if torch else "sublinear", schedule=cfg, batch=b,
         seq=t, tf32="--tf32" in a, ms_step=cost, ms_min=cost - 0.5, ms_max=cost + 0.5,
         peak_MiB=peak + n, peak_source="device free-memory drop", device="Fake GPU",
         cudart=13000, cudnn=91900, cublas="13.0.2", cublaslt=130002,
         gpu_libs=["/fake/libcudnn.so.9.19.0"])
if torch:
    d.update(torch="2.11.0+cu130", transformers="5.17.0", attention="sdpa",
             max_allocated=int(peak * 0.9) << 20, max_reserved=int(peak) << 20,
             matmul_allow_tf32=True, cudnn_allow_tf32=True)
else:
    d.update(planned_total=int(peak * 0.8) << 20, budget_bytes=0, recompute_fraction=0.1)
    if "--profile" in a:
        d.update(profile_steps=1, profile=[
            {"layer": "SoftmaxCrossEntropy", "pass": "loss", "calls": 1, "s_per_step": 0.03},
            {"layer": "CausalAttention", "pass": "backward", "calls": 12, "s_per_step": 0.02}])
print("some progress text")
print(json.dumps(d))
'''


def fail(msg, out=""):
    print(out)
    print("FAIL: " + msg)
    sys.exit(1)


def read_jsonl(path):
    return [json.loads(x) for x in open(path) if x.strip()]


def clean_env(**extra):
    """The caller's environment without gpu.sh's and gpu_gpt2.py's own
    settings (a GPU session exports SL_RESNET_SCHEDULES and the like for
    its bench call, and the stand-ins here must not inherit them)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SL_GPT2_", "SL_RESNET_", "SL_GPU_"))}
    # nor the carried GPU packages of a developer's checkout (gpu.sh would
    # unpack them into the source tree)
    env["SL_GPU_DEPS"] = os.path.join(tempfile.gettempdir(), "sl-no-gpu-deps")
    env.update(extra)
    return env


def run_phase(bench, args, env=None):
    p = subprocess.run([sys.executable, os.path.join(bench, "gpu_gpt2.py")] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600, env=env)
    return p.returncode, p.stdout


def stand_ins(bench, tmp):
    fake = os.path.join(tmp, "bench_gpt2")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)
    env = clean_env(FAKE_COST=json.dumps(COST), FAKE_PEAK=json.dumps(PEAK))

    # three whole rounds
    env["FAKE_DIR"] = os.path.join(tmp, "counts")
    os.makedirs(env["FAKE_DIR"])
    out = os.path.join(tmp, "out")
    rc, text = run_phase(bench, ["--bin", fake, "--python", fake, "--out", out], env)
    if rc != 0:
        fail("gpu_gpt2.py on stand-ins exited with %d" % rc, text)
    runs = read_jsonl(os.path.join(out, "gpt2_runs.jsonl"))
    keys = [r["key"] for r in runs]
    if len(runs) != 30 or keys[:10] != keys[10:20][::-1] or keys[:10] != keys[20:]:
        fail("the runs are not 3 rounds of 10 in alternating order: %s" % keys, text)
    rows = read_jsonl(os.path.join(out, "gpt2.jsonl"))
    if len(rows) != 10:
        fail("gpt2.jsonl has %d lines, not 10" % len(rows), text)
    for r in rows:
        for k in ("model", "side", "schedule", "batch", "seq", "tf32", "ms_step", "ms_min",
                  "ms_max", "peak_MiB", "device"):
            if k not in r or r[k] is None:
                fail("row %s lacks %s" % (r, k), text)
        base = COST[r["schedule"]] * (1 if r["batch"] == 8 else 0.5)
        want = (base + 1, base, base + 2)
        if (r["ms_step"], r["ms_min"], r["ms_max"]) != want or r["rounds"] != 3:
            fail("row %s: median and range %s, want %s"
                 % (r["schedule"], (r["ms_step"], r["ms_min"], r["ms_max"]), want), text)
        if r["peak_MiB"] != PEAK[r["schedule"]] + 2 or not r["tf32"] or r["cudnn"] != 91900:
            fail("row %s: peak %s, tf32 %s, cudnn %s" % (r["schedule"], r["peak_MiB"], r["tf32"],
                                                         r["cudnn"]), text)
        if r["side"] == "pytorch" and r.get("max_reserved_MiB") != PEAK[r["schedule"]] + 0:
            fail("row %s: max_reserved_MiB %s" % (r["schedule"], r.get("max_reserved_MiB")), text)
    profiled = read_jsonl(os.path.join(out, "gpt2_profile.jsonl"))
    if sorted((p["schedule"], p["batch"]) for p in profiled) != \
            [("none", 8), ("none", 128), ("sqrt", 8), ("sqrt", 128)]:
        fail("profiles of %s" % [(p["schedule"], p["batch"]) for p in profiled], text)
    ptxt = open(os.path.join(out, "gpt2_profile.txt")).read()
    if "SoftmaxCrossEntropy" not in ptxt or "by layer type" not in ptxt:
        fail("gpt2_profile.txt lacks the layer types", ptxt)
    vtxt = open(os.path.join(out, "gpt2_versions.txt")).read()
    if "cudnn 91900" not in vtxt or "pytorch:" not in vtxt or "libcudnn.so.9.19.0" not in vtxt:
        fail("gpt2_versions.txt lacks the versions", vtxt)
    # B=8 T=1024: none/plain 51/101 (met), sqrt/checkpoint 91/111 (not met)
    if "ours none / PyTorch plain, step time (target ≤ 0.6): 0.505 (met)" not in text or \
            "ours sqrt / PyTorch checkpoint, step time (target ≤ 0.7): 0.820 (NOT met)" not in text:
        fail("the targets are not judged from the medians", text)
    if "| B=8 T=1024 | ours none | 51.0 | 50.0–52.0 | 3 |" not in text:
        fail("no table row for ours none", text)

    # a budget that ends the phase in round 2
    env["FAKE_DIR"] = os.path.join(tmp, "counts2")
    os.makedirs(env["FAKE_DIR"])
    env["FAKE_SLEEP"] = "0.3"
    out2 = os.path.join(tmp, "out2")
    t0 = time.time()
    rc, text = run_phase(bench, ["--bin", fake, "--python", fake, "--out", out2, "--budget-s",
                                 "5.5"], env)
    runs = read_jsonl(os.path.join(out2, "gpt2_runs.jsonl"))
    rows = read_jsonl(os.path.join(out2, "gpt2.jsonl"))
    if rc != 0 or "stopped at round 2" not in text or not 10 <= len(runs) < 20:
        fail("a 5.5 s budget did not stop the phase in round 2 (%d runs, %.1f s)"
             % (len(runs), time.time() - t0), text)
    if not all(r["rounds"] in (1, 2) for r in rows) or \
            not any(r.get("short", "").startswith("round 2") for r in rows):
        fail("rows of a stopped phase do not say so: %s" % rows, text)

    # nvidia-smi's log: a run's peak above its start
    sys.path.insert(0, bench)
    import gpu_gpt2
    smi = os.path.join(tmp, "smi.csv")
    with open(smi, "w") as f:
        for i, m in enumerate((5, 5, 600, 7300, 7300, 12)):
            ts = time.localtime(1_800_000_000 + i)
            f.write("%s.%03d, %d\n" % (time.strftime("%Y/%m/%d %H:%M:%S", ts), 500, m))
    samples = gpu_gpt2.smi_samples(smi)
    got = gpu_gpt2.smi_peak(samples, {"started": 1_800_000_000.2, "ended": 1_800_000_004.9})
    if len(samples) != 6 or got != 7295:
        fail("nvidia-smi's samples %s give %s, not 7295" % (samples, got))


FAKE_RESNET = r'''#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
print(json.dumps({"side": "sublinear", "model": "resnet152",
                  "schedule": a[a.index("--schedule") + 1], "batch": 16, "planned_total": 1 << 30,
                  "planned_arena": 1 << 29, "measured_total": 1 << 30, "device_used": 1 << 30,
                  "recompute_fraction": 0.1, "it_per_s": 20.0, "tf32": "--tf32" in a,
                  "deterministic": True, "device": "Fake GPU"}))
'''

FAKE_PY = r'''#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
here = os.path.dirname(os.path.abspath(__file__))
if a and a[0].endswith("bench_gpu_torch.py"):
    seg = a[a.index("--segments") + 1]
    print(json.dumps({"side": "pytorch", "mode": "plain" if seg == "0" else "checkpoint:" + seg,
                      "batch": 16, "max_allocated": 2 << 30, "max_reserved": 3 << 30,
                      "device_drop": 3 << 30, "it_per_s": 16.0, "tf32": "--tf32" in a,
                      "deterministic": False, "device": "Fake GPU", "torch": "2.11.0"}))
elif a and a[0].endswith("bench_gpt2_torch.py"):
    fake = os.path.join(here, "bench", "bench_gpt2")
    os.execv(fake, [fake] + a)
else:
    os.execv(sys.executable, [sys.executable] + a)
'''

SUBLINEAR = r'''#!/usr/bin/env python3
import json
print(json.dumps({"planned_bytes": {"total": 3 << 30}}))
'''


def gpu_sh(bench, tmp):
    fake = os.path.join(tmp, "fakebuild")
    os.makedirs(os.path.join(fake, "bench"))
    for path, text in (("bench/bench_gpt2", FAKE), ("bench/bench_gpu", FAKE_RESNET),
                       ("sublinear", SUBLINEAR), ("python", FAKE_PY)):
        with open(os.path.join(fake, path), "w") as f:
            f.write(text)
        os.chmod(os.path.join(fake, path), 0o755)
    out = os.path.join(tmp, "gpush")
    env = clean_env(OUT=out, PYTHON=os.path.join(fake, "python"), SL_GPU_ROUNDS="3",
               SL_GPT2_STEPS="4", SL_RESNET_TF32="on", FAKE_COST=json.dumps(COST),
               FAKE_PEAK=json.dumps(PEAK), FAKE_DIR=os.path.join(tmp, "counts3"))
    os.makedirs(env["FAKE_DIR"])
    p = subprocess.run(["bash", os.path.join(bench, "gpu.sh"), fake, "gpt2", "resnet", "table"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                       env=env)
    text = p.stdout
    if p.returncode != 0:
        fail("gpu.sh gpt2 resnet table exited with %d" % p.returncode, text)
    runs = read_jsonl(os.path.join(out, "gpt2_runs.jsonl"))
    rows = read_jsonl(os.path.join(out, "gpt2.jsonl"))
    if len(runs) != 30 or len(rows) != 10 or any(r["steps"] != 4 for r in rows):
        fail("gpu.sh's gpt2 phase: %d runs, %d rows, steps %s (SL_GPT2_STEPS=4)"
             % (len(runs), len(rows), [r["steps"] for r in rows]), text)
    ours = [(r["round"], r["schedule"]) for r in read_jsonl(os.path.join(out, "ours.jsonl"))]
    want = [(1, "none"), (1, "sqrt"), (1, "budget:1610612736"), (2, "budget:1610612736"),
            (2, "sqrt"), (2, "none"), (3, "none"), (3, "sqrt"), (3, "budget:1610612736")]
    if ours != want:
        fail("ResNet rounds %s, want %s" % (ours, want), text)
    table = open(os.path.join(out, "RESULTS-gpu.md")).read()
    if "| sublinear none | 20.00 | 50 | 50–50 | 3 |" not in table or \
            "| B=8 T=1024 | ours none | 51.0 | 50.0–52.0 | 3 |" not in table:
        fail("RESULTS-gpu.md lacks the medians over 3 rounds", table)
    for phase in ("gpt2", "resnet"):
        if not re.search(r"== %s: \d+ s" % phase, text):
            fail("gpu.sh does not say how long %s took" % phase, text)
    # the profile phase with TF32 on (gpu_session.sh's rprofile): none, then sqrt
    env["SL_PROFILE_TF32"] = "1"
    p = subprocess.run(["bash", os.path.join(bench, "gpu.sh"), fake, "profile"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                       env=env)
    prof = read_jsonl(os.path.join(out, "profile.jsonl")) if p.returncode == 0 else []
    if [(r["schedule"], r["tf32"]) for r in prof] != [("none", True), ("sqrt", True)] or \
            "TF32 on" not in p.stdout:
        fail("gpu.sh profile with SL_PROFILE_TF32=1: exit %d, runs %s"
             % (p.returncode, [(r.get("schedule"), r.get("tf32")) for r in prof]), p.stdout)


def real_run(bench, build, tmp):
    out = os.path.join(tmp, "real")
    rc, text = run_phase(bench, ["--bin", os.path.join(build, "bench", "bench_gpt2"), "--out", out,
                                 "--device", "cpu", "--shapes", "2x16", "--schedules",
                                 "none,least", "--modes", "plain", "--rounds", "1", "--steps",
                                 "2", "--model-args",
                                 "--layers 2 --embd 64 --heads 4 --vocab 512 --context 64"])
    if rc != 0:
        fail("gpu_gpt2.py with the real bench_gpt2 exited with %d" % rc, text)
    rows = {r["schedule"]: r for r in read_jsonl(os.path.join(out, "gpt2.jsonl"))}
    for s in ("none", "least"):
        r = rows.get(s, {})
        if not (r.get("ms_step") and r.get("peak_MiB") and r.get("device") == "cpu"
                and r.get("model") == "gpt2-L2-C64-H4-V512"):
            fail("our %s row: %s" % (s, r), text)
    if rows["least"]["planned_bytes"] >= rows["none"]["planned_bytes"]:
        fail("least plans no less than none", text)
    t = rows.get("plain", {})
    if t.get("ms_step") is None and "SKIPPED" not in str(t.get("error")):
        fail("PyTorch's row neither ran nor was skipped: %s" % t, text)
    print(text)
    # mixed precision: ours with bf16 activations (PyTorch under autocast)
    # into gpt2_bf16.jsonl, its plan smaller than float's
    rc, text = run_phase(bench, ["--bin", os.path.join(build, "bench", "bench_gpt2"), "--out", out,
                                 "--device", "cpu", "--shapes", "2x16", "--schedules", "none",
                                 "--modes", "plain", "--rounds", "1", "--steps", "2",
                                 "--precision", "bf16", "--model-args",
                                 "--layers 2 --embd 64 --heads 4 --vocab 512 --context 64"])
    if rc != 0:
        fail("gpu_gpt2.py --precision bf16 exited with %d" % rc, text)
    bf = {r["schedule"]: r for r in read_jsonl(os.path.join(out, "gpt2_bf16.jsonl"))}
    r = bf.get("none", {})
    if not (r.get("ms_step") and r.get("precision") == "bf16"
            and r.get("planned_bytes", 1 << 62) < rows["none"]["planned_bytes"]):
        # bytes, not the rounded MiB: at this size the two differ by 44 KiB
        fail("our bf16 row: %s (float plans %s bytes)" % (r, rows["none"]["planned_bytes"]), text)
    t = bf.get("plain", {})
    if t.get("ms_step") is None and "SKIPPED" not in str(t.get("error")):
        fail("PyTorch's autocast row neither ran nor was skipped: %s" % t, text)
    print(text)


def bench_json(cmd, what):
    """The last JSON line of bench_gpt2 run as cmd (it must succeed)."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if r.returncode != 0:
        fail("bench_gpt2 %s exited with %d" % (what, r.returncode), r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_refused(cmd, what):
    """bench_gpt2 run as cmd must stop with its usage."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode == 0 or "usage" not in r.stderr:
        fail("bench_gpt2 %s was not refused with its usage" % what, r.stderr)


def dropout_option(build):
    """bench_gpt2 --dropout P trains with GPT-2's dropout rates at P and its
    JSON says so (gpu_session.sh's ab stage times the fused attention's
    dropout with it); a rate outside [0, 1) is refused."""
    base = [os.path.join(build, "bench", "bench_gpt2"), "--device", "cpu", "--layers", "1",
            "--embd", "32", "--heads", "2", "--vocab", "128", "--context", "16", "--batch", "2",
            "--seq", "16", "--steps", "1", "--json"]
    rows = {p: bench_json(base + ["--dropout", p], "--dropout " + p) for p in ("0", "0.1")}
    for p, r in rows.items():
        if r.get("dropout") != float(p):
            fail("bench_gpt2 --dropout %s's JSON: %s" % (p, r))
    for bad in ("1", "-0.5"):
        assert_refused(base + ["--dropout", bad], "--dropout " + bad)
    print("bench_gpt2 --dropout: %s" % {p: rows[p]["dropout"] for p in rows})


def least_slack(build):
    """bench_gpt2 --schedule least:F plans the operator-level budget at the
    least planned peak times 1 + F: its budget is that, its plan fits it and
    is no smaller than least's; F outside (0, 1) is refused."""
    base = [os.path.join(build, "bench", "bench_gpt2"), "--device", "cpu", "--layers", "2",
            "--embd", "64", "--heads", "4", "--vocab", "512", "--context", "64", "--batch", "2",
            "--seq", "32", "--plan-only", "--json"]
    least = bench_json(base + ["--schedule", "least"], "--schedule least")
    slack = bench_json(base + ["--schedule", "least:0.05"], "--schedule least:0.05")
    want = least["planned_total"] + int(0.05 * least["planned_total"])
    if slack["budget_bytes"] != want or not (
            least["planned_total"] <= slack["planned_total"] <= slack["budget_bytes"]):
        fail("least:0.05 against least: %s / %s (budget wanted %d)" % (slack, least, want))
    for bad in ("least:0", "least:1.5", "least:x"):
        assert_refused(base + ["--schedule", bad], "--schedule " + bad)
    print("bench_gpt2 least:0.05: budget %d bytes over least's %d, planned %d"
          % (slack["budget_bytes"], least["planned_total"], slack["planned_total"]))


def cuda_run(build):
    cmd = [os.path.join(build, "bench", "bench_gpt2"), "--device", "cuda", "--tf32", "--layers",
           "2", "--embd", "64", "--heads", "4", "--vocab", "512", "--context", "64", "--batch",
           "2", "--seq", "16", "--steps", "2", "--json"]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        if "--device cuda" not in p.stderr or time.time() - t0 > 30:
            fail("bench_gpt2 --device cuda without a GPU: %r after %.1f s"
                 % (p.stderr, time.time() - t0))
        print("no GPU: bench_gpt2 --device cuda says: " + p.stderr.strip())
        return
    r = json.loads(p.stdout.strip().splitlines()[-1])
    if not r.get("device") or not r.get("tf32") or not r.get("peak_MiB") or not r.get("cudnn"):
        fail("bench_gpt2 --device cuda's JSON: %s" % r)
    print("GPU: %s, %.1f ms/step, %.1f MiB, cuDNN %s, cuBLAS %s"
          % (r["device"], r["ms_step"], r["peak_MiB"], r["cudnn"], r["cublas"]))


NCU_CSV = """==PROF== Connected to process 1 (bench_gpt2)
step 1: 1.0 s
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","b","h","small_k(int)","1","13","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1,000"
"1","1","b","h","void big_k<true>(float *)","1","13","(128, 1, 1)","(96, 16, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","us","5"
"2","1","b","h","small_k(int)","1","13","(256, 1, 1)","(8, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","2,000"
"""


def ncu_table(bench, tmp):
    """bench/ncu_table.py on a small ncu CSV: kernels by total, largest
    first (units read: ns with thousands separators, us), the program's
    own lines skipped."""
    path = os.path.join(tmp, "ncu.csv")
    with open(path, "w") as f:
        f.write(NCU_CSV)
    p = subprocess.run([sys.executable, os.path.join(bench, "ncu_table.py"), path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    lines = [x for x in p.stdout.splitlines() if x.strip()]
    body = [x.split() for x in lines[1:-1]]
    if (p.returncode != 0 or len(body) != 2 or body[0][-1] != "big_k<true>"
            or body[0][0] != "0.005" or body[1][-1] != "small_k" or body[1][0] != "0.003"
            or body[1][2] != "2" or "total 0.008 ms over 3 kernel runs" not in lines[-1]):
        fail("ncu_table.py", p.stdout)


def main():
    bench, build = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        ncu_table(bench, tmp)
        stand_ins(bench, tmp)
        gpu_sh(bench, tmp)
        real_run(bench, build, tmp)
    dropout_option(build)
    least_slack(build)
    cuda_run(build)
    print("OK")


if __name__ == "__main__":
    main()
