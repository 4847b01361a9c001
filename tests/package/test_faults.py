"""Bad input and faults: a bad configuration, modules that are not TorchScript, a script that
raises mid-step, Ctrl-C and SIGTERM mid-run. Errors are clear; the dump is closed; every file
under a final name loads."""
import glob
import os
import signal
import subprocess
import textwrap
import time

import pytest

import graphdump.torch as gd
from conftest import (BIN, BUILD_DIR, clean_env, every_npy_loads, execution_order, graphdump,
                      python, write_config)

BAD_CONFIG = """{"common_dump_settings": {"dump_mode": 7, "path": "/tmp/x", "net_name": "bad name",
  "iteration": "3-1", "input_output": 0, "kernels": [], "support_device": [0]}}"""


def test_bad_configuration_lists_every_problem(tmp_path, user_train):
    config = tmp_path / "bad.json"
    config.write_text(BAD_CONFIG)
    with pytest.raises(gd.ConfigError) as error:
        gd.Dump(config)
    message = str(error.value)
    for key in ("common_dump_settings.dump_mode", "common_dump_settings.net_name",
                "common_dump_settings.iteration"):
        assert key in message, message
    assert isinstance(error.value, ValueError)
    run = graphdump("python", "--config", config, user_train, tmp_path / "out.npz")
    assert run.returncode == 2
    assert "common_dump_settings.dump_mode" in run.stderr and "bad.json" in run.stderr
    assert not (tmp_path / "out.npz").exists()  # the script did not run


def test_usage_errors(tmp_path, user_train):
    for args, words in ((["--nproc", "0", user_train], "--nproc takes a number"),
                        (["--bogus", user_train], "unknown option --bogus"),
                        ([str(tmp_path / "nope.py")], "nope.py: no such file"),
                        (["--config", str(tmp_path / "none.json"), user_train], "no such file"),
                        ([], "no script given")):
        run = graphdump("python", *args)
        assert run.returncode == 2, (args, run.stderr)
        assert words in run.stderr, (args, run.stderr)


def script(tmp_path, body):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return path


PLAIN_MODULE = """
import torch
net = torch.nn.Linear(4, 2)  # a plain module: dumped through the eager capture
scale = torch.nn.Linear(1, 1)  # never called: its weight is used directly
opt = torch.optim.SGD([*net.parameters(), *scale.parameters()], lr=0.1)
for _ in range(2):
    opt.zero_grad()
    (net(torch.randn(3, 4)).sum() * scale.weight.sum()).backward()
    opt.step()
print("done")
"""

NO_MODULE = """
import torch
w = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([w], lr=0.1)
(w * 2).sum().backward()
opt.step()
print(w.sum().item())
"""


def test_plain_modules_are_dumped_and_unowned_parameters_named(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    run = graphdump("python", "--config", config, script(tmp_path, PLAIN_MODULE), check=0)
    assert "done" in run.stdout
    assert "TorchScript" not in run.stderr
    order = execution_order(tmp_path / "dump" / "rank_0")
    assert order[0] == "Default/linear-op0"
    assert "Default/optimizer-SGD/weight/SGD-op" in " ".join(order)
    # The never-called module's weight has a gradient: its update is dumped, named as
    # documented; its bias has none and is not updated.
    assert "1 of the optimizer's 4 parameters belong to no module that was called" in run.stderr
    assert [k for k in order if "/unnamed_" in k] == [
        k for k in order if k.startswith("Default/optimizer-SGD/unnamed_0/SGD-op")]
    assert len([k for k in order if "/unnamed_" in k]) == 1
    config = write_config(tmp_path / "n.json", tmp_path / "none")
    run = graphdump("python", "--config", config, script(tmp_path, NO_MODULE), check=0)
    assert "the script called no torch.nn.Module, so no kernel was dumped" in run.stderr
    # Its optimizer's parameter has a gradient but no graph holds it: nothing is written, and
    # the warning says so.
    assert ("1 of the optimizer's 1 parameters belong to no module that was called, and no "
            "module has run, so nothing of them is written") in run.stderr
    assert glob.glob(str(tmp_path / "none" / "**" / "*.npy"), recursive=True) == []


RAISES_MID_STEP = """
import torch
net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(4):
    opt.zero_grad()
    net(torch.randn(3, 4)).sum().backward()
    if step == 2:
        raise RuntimeError("user error in step 2")
    opt.step()
"""


def test_script_that_raises_mid_step_leaves_a_closed_dump(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "full"},
                          e2e={"enable": False})
    run = graphdump("python", "--config", config, script(tmp_path, RAISES_MID_STEP))
    assert run.returncode == 1
    assert "user error in step 2" in run.stderr
    assert "graphdump: dump: " in run.stderr  # closed: the summary is printed
    root = tmp_path / "dump" / "rank_0"
    assert every_npy_loads(root) > 20
    # Iteration 2 (forward and backward ran) is complete: one statistic row per tensor file.
    rows = (root / "Net" / "0" / "2" / "statistic.csv").read_text().splitlines()[1:]
    assert len(rows) == len(glob.glob(f"{root}/Net/0/2/*.npy")) > 5


LONG_RUN = """
import sys, time, torch
net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh()))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(100000):
    opt.zero_grad()
    net(torch.randn(32, 64)).sum().backward()
    opt.step()
    if step == 3:
        print("running", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_interrupted_run_leaves_whole_files(tmp_path, sig):
    """SIGHUP (a closed terminal) killed the interpreter: .tmp files were left and queued
    tensors lost. Each signal now closes the dump: every queued tensor is written, no temporary
    is left, and INCOMPLETE says why the run ended."""
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "full"},
                          e2e={"enable": False})
    process = subprocess.Popen([BIN, "python", "--config", config, script(tmp_path, LONG_RUN)],
                               env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == "running"
    time.sleep(0.3)  # mid-run, writes in flight
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert process.returncode in (130, -signal.SIGINT) and "KeyboardInterrupt" in stderr
    else:
        assert process.returncode == 128 + sig, stderr
    assert "graphdump: dump: " in stderr, stderr  # the dump was closed
    root = tmp_path / "dump" / "rank_0"
    assert every_npy_loads(root) > 20
    for csv in glob.glob(f"{root}/Net/0/*/statistic.csv"):
        lines = open(csv).read().split("\n")
        assert lines[-1] == "" and all(line.endswith(",") for line in lines[1:-1]), csv
    assert [p for p in glob.glob(f"{root}/**/.*", recursive=True) if ".tmp." in p] == []
    # Cut short by the signal: INCOMPLETE says so.
    marker = (root / ".dump_metadata" / "INCOMPLETE").read_text()
    assert ("KeyboardInterrupt" if sig == signal.SIGINT else f"status {128 + sig}") in marker
    # Queued tensors were written: each statistic row (one per tensor, added when its file was
    # queued) has its .npy in every iteration but the last, which the signal cut short.
    steps = sorted(int(d) for d in os.listdir(root / "Net" / "0") if d.isdigit())
    for step in steps[:-1]:
        step_dir = root / "Net" / "0" / str(step)
        rows = (step_dir / "statistic.csv").read_text().splitlines()[1:]
        assert len(rows) == len(glob.glob(f"{step_dir}/*.npy")), step


NEVER_CLOSED = """
import sys, torch
sys.path.insert(0, {package!r})
import graphdump.torch as gd
dump = gd.Dump({config!r}).start()  # never closed: interpreter exit closes it
net = dump.wrap(torch.jit.script(torch.nn.Linear(4, 4)))
opt = dump.track(torch.optim.SGD(net.parameters(), lr=0.1))
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(2, 4)).sum().backward()
    opt.step()
"""


def test_a_dump_never_closed_is_closed_at_exit(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "statistic"},
                          e2e={"enable": False})
    body = NEVER_CLOSED.format(package=os.path.join(BUILD_DIR, "python"), config=config)
    python(script(tmp_path, body), check=0)
    root = tmp_path / "dump" / "rank_0" / "Net" / "0"
    for it in range(3):  # the last iteration's rows too: written by the exit-time close
        rows = (root / str(it) / "statistic.csv").read_text().splitlines()
        assert len(rows) > 5 and all(r.endswith(",") for r in rows[1:])
