"""--overwrite while another run writes the same dump path (docs/reliability.md): the audit saw
"cannot remove .../rank_0: No such file or directory" (train exit 3 with 0 steps, python
OSError) and one run's dump left half deleted. Now a live run's directory is refused, overwrite
or not, and stays whole; a finished run's is replaced in one step. Repeated at random moments
of a run that keeps dumping until the other run has ended."""
import glob
import os
import random
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import gdmodels
import gdtest as t

TRAIN = ["train", gdmodels.model_path("small_cnn"), "--input-shape", "4x3x16x16", "--classes", "5"]
ENV = dict(os.environ, **gdmodels.env_one_thread())
for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"):
    ENV.pop(key, None)

# Dumps a step at a time (each an iteration) until the file argv[1] exists, then one more.
KEEPS_DUMPING = """
import os, sys, time, torch
net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
def step():
    opt.zero_grad()
    net(torch.randn(4, 8)).sum().backward()
    opt.step()
for i in range(3):
    step()
print("running", flush=True)
while not os.path.exists(sys.argv[1]):
    step()
    time.sleep(0.02)  # tens of steps a second, not thousands
step()
"""


def iterations(dump):
    net = os.path.join(dump, "rank_0", "Net", "0")
    return sorted(int(d) for d in os.listdir(net) if d.isdigit()) if os.path.isdir(net) else []


def assert_whole(dump, what, at_least=1):
    """The dump of one finished run: iterations 0..n-1 (n >= at_least), every .npy loads, no
    INCOMPLETE, and nothing else in the dump path (no lock, no directory renamed aside)."""
    its = iterations(dump)
    assert len(its) >= at_least and its == list(range(len(its))), (
        f"{what}: every iteration is there: {its}")
    bad = []
    for f in glob.glob(os.path.join(dump, "rank_0", "Net", "0", "*", "*.npy")):
        try:
            np.load(f)
        except Exception as e:  # noqa: BLE001  (any failure to load is the finding)
            bad.append(f"{f}: {e}")
    assert not bad, f"{what}: every .npy loads: {bad[:3]}"
    assert not os.path.exists(os.path.join(dump, "rank_0", ".dump_metadata", "INCOMPLETE")), (
        f"{what}: the dump is complete")
    assert sorted(os.listdir(dump)) == ["rank_0"], f"{what}: nothing else in the dump path"


@pytest.fixture(scope="module")
def setup():
    """(work, dump path, configuration, the keeps-dumping script)."""
    work = t.temp_dir()
    dump = os.path.join(work, "dump")
    cfg = t.write_config(os.path.join(work, "c.json"), dump,
                         {"saved_data": "full", "support_device": [0]}, {"enable": False})
    script = os.path.join(work, "keeps_dumping.py")
    with open(script, "w") as f:
        f.write(KEEPS_DUMPING)
    yield work, dump, cfg, script
    t.cleanup(work)


def start(setup, sentinel, *extra):
    _, _, cfg, script = setup
    return subprocess.Popen([t.BIN, "python", "--config", cfg, *extra, script, sentinel],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


@pytest.mark.parametrize("trial", range(4))
def test_overwrite_of_a_live_run_is_refused(setup, trial):
    work, dump, cfg, script = setup
    # A dumps; B (train, or graphdump python) overwrites at a random moment of A's dump.
    shutil.rmtree(dump, ignore_errors=True)
    sentinel = os.path.join(work, f"stop{trial}")
    a = start(setup, sentinel)
    try:
        first_line = a.stdout.readline().strip()
        time.sleep(random.Random(20261125 + trial).uniform(0.0, 0.5))
        if trial % 2 == 0:
            code, out, err = t.run(*TRAIN, "--config", cfg, "--steps", 2, "--overwrite",
                                   env=ENV)
        else:
            # (its stop file exists: were it let in, it would end after four steps)
            code, out, err = t.run("python", "--config", cfg, "--overwrite", script, script,
                                   env=ENV)
        a_was_running = a.poll() is None
    finally:
        open(sentinel, "w").close()  # A ends whatever happened
        a_out, a_err = a.communicate(timeout=300)
    what = f"trial {trial}"
    assert first_line == "running", f"{what}: A runs"
    assert a_was_running, f"{what}: A is still dumping while B tries"
    assert a.returncode == 0, f"{what}: A ends well: {a_err[-400:]}"
    assert code == 2, f"{what}: B's overwrite is refused: {out[-200:]} {err[-400:]}"
    assert f"{dump}/rank_0 is being written by another run now (process {a.pid})" in err, (
        f"{what}: the refusal names the directory and the run: {err[-400:]}")
    assert "step 1/" not in out and "running" not in out and "Traceback" not in err, (
        f"{what}: nothing ran, no traceback: {out[-200:]} {err[-400:]}")
    assert_whole(dump, f"{what}: A's dump", at_least=4)


def test_two_runs_at_once_one_gets_it(setup):
    work, dump, cfg, script = setup
    # Two runs started at once, both with --overwrite: one dumps, the other is refused.
    sentinel = os.path.join(work, "stop_both")
    runs = [start(setup, sentinel, "--overwrite") for _ in range(2)]
    deadline = time.monotonic() + 120
    while all(p.poll() is None for p in runs) and time.monotonic() < deadline:
        time.sleep(0.05)
    open(sentinel, "w").close()
    results = [(p.returncode, err) for p in runs for _, err in [p.communicate(timeout=300)]]
    assert sorted(code for code, _ in results) == [0, 2], f"one of two gets it: {results}"
    assert any("is being written by another run now" in err for code, err in results if code), (
        f"the other is told why: {results}")
    assert_whole(dump, "two at once", at_least=4)


def test_overwrite_of_an_ended_run_replaces_it(setup):
    work, dump, cfg, script = setup
    # Once the run has ended, --overwrite replaces its dump.
    code, out, err = t.run(*TRAIN, "--config", cfg, "--steps", 2, "--overwrite", env=ENV)
    assert code == 0, f"--overwrite of an ended run: {err[-400:]}"
    assert_whole(dump, "after the overwrite", at_least=2)
    assert iterations(dump) == [0, 1], "only the new run's iterations"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
