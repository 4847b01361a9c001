"""--overwrite while another run writes the same dump path (docs/reliability.md): the audit saw
"cannot remove .../rank_0: No such file or directory" (train exit 3 with 0 steps, python
OSError) and one run's dump left half deleted. Now a live run's directory is refused, overwrite
or not, and stays whole; a finished run's is replaced in one step. Repeated at random moments."""
import glob
import os
import random
import shutil
import subprocess
import time

import numpy as np

import gdmodels
import gdtest as t

MODEL = gdmodels.model_path("small_cnn")
TRAIN = ["train", MODEL, "--input-shape", "4x3x16x16", "--classes", "5"]
ENV = dict(os.environ, **gdmodels.env_one_thread())
for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"):
    ENV.pop(key, None)
RNG = random.Random(20261125)
STEPS = 30


def start(cfg, steps, *extra):
    return subprocess.Popen([t.BIN, *TRAIN, "--config", cfg, "--steps", str(steps), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def iterations(dump):
    net = os.path.join(dump, "rank_0", "Net", "0")
    return sorted(int(d) for d in os.listdir(net) if d.isdigit()) if os.path.isdir(net) else []


def expect_whole(dump, steps, what):
    """The dump of one finished run of `steps` steps: every iteration, every .npy loads, no
    INCOMPLETE, and nothing else in the dump path (no lock, no directory renamed aside)."""
    t.expect_eq(iterations(dump), list(range(steps)), f"{what}: every iteration is there")
    bad = []
    for f in glob.glob(os.path.join(dump, "rank_0", "Net", "0", "*", "*.npy")):
        try:
            np.load(f)
        except Exception as e:  # noqa: BLE001  (any failure to load is the finding)
            bad.append(f"{f}: {e}")
    t.expect(not bad, f"{what}: every .npy loads: {bad[:3]}")
    t.expect(not os.path.exists(os.path.join(dump, "rank_0", ".dump_metadata", "INCOMPLETE")),
             f"{what}: the dump is complete")
    t.expect_eq(sorted(os.listdir(dump)), ["rank_0"], f"{what}: nothing else in the dump path")


work = t.temp_dir()
try:
    dump = os.path.join(work, "dump")
    cfg = t.write_config(os.path.join(work, "c.json"), dump,
                         {"saved_data": "full", "support_device": [0]}, {"enable": False})
    script = os.path.join(work, "user.py")
    with open(script, "w") as f:
        f.write("import torch\n"
                f"m = torch.jit.load({MODEL!r})\n"
                "print(float(m(torch.zeros(4, 3, 16, 16)).sum()))\n")
    for trial in range(4):
        # A runs; B (train, or graphdump python) overwrites at a random moment of A's dump.
        shutil.rmtree(dump, ignore_errors=True)  # so that the files waited for are A's
        a = start(cfg, STEPS)
        deadline = time.monotonic() + 60
        while a.poll() is None and time.monotonic() < deadline and not glob.glob(
                os.path.join(dump, "rank_0", "Net", "0", "*", "*.npy")):
            time.sleep(0.01)
        time.sleep(RNG.uniform(0.0, 0.5))
        if trial % 2 == 0:
            code, out, err = t.run(*TRAIN, "--config", cfg, "--steps", 2, "--overwrite", env=ENV)
        else:
            code, out, err = t.run("python", "--config", cfg, "--overwrite", script, env=ENV)
        a_out, a_err = a.communicate(timeout=300)
        what = f"trial {trial}"
        t.expect_eq(a.returncode, 0, f"{what}: the running dump's run ends well: {a_err[-400:]}")
        t.expect(f"step {STEPS}/{STEPS}" in a_out, f"{what}: it ran every step")
        t.expect_eq(code, 2, f"{what}: the overwrite is refused: {out[-200:]} {err[-400:]}")
        t.expect(f"{dump}/rank_0 is being written by another run now (process {a.pid})" in err,
                 f"{what}: the refusal names the directory and the run: {err[-400:]}")
        t.expect("step 1/" not in out and "Traceback" not in err,
                 f"{what}: nothing ran, no traceback: {out[-200:]} {err[-400:]}")
        expect_whole(dump, STEPS, f"{what}: the running dump")

    # Two runs started at once, both with --overwrite: one dumps, the other is refused.
    runs = [start(cfg, STEPS, "--overwrite") for _ in range(2)]
    results = [(p.returncode, err) for p in runs for _, err in [p.communicate(timeout=300)]]
    t.expect_eq(sorted(code for code, _ in results), [0, 2], f"one of two gets it: {results}")
    t.expect(any("is being written by another run now" in err for code, err in results if code),
             f"the other is told why: {results}")
    expect_whole(dump, STEPS, "two at once")

    # Once the run has ended, --overwrite replaces its dump.
    code, out, err = t.run(*TRAIN, "--config", cfg, "--steps", 2, "--overwrite", env=ENV)
    t.expect_eq(code, 0, f"--overwrite of an ended run: {err[-400:]}")
    expect_whole(dump, 2, "after the overwrite")
finally:
    t.cleanup(work)
t.finish()
