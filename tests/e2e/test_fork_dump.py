"""fork() while a Dump is on (docs/python.md): the child runs the model and exits normally (its
atexit closes the Dump); it neither closes, drains nor removes the parent's dump and dumps
nothing. Synchronous: the parent's INCOMPLETE is still there after the child exited, and goes at
the parent's close. Asynchronous: the child exits at once (it used to hang draining writer
threads that exist only in the parent)."""
import glob
import os
import subprocess
import sys

import pytest

import gdtest as t

SCRIPT = """
import os, sys
import torch
from graphdump.torch import Dump

incomplete = os.path.join(sys.argv[2], "rank_0", ".dump_metadata", "INCOMPLETE")
dump = Dump(sys.argv[1])
dump.start()
model = dump.wrap(torch.jit.script(torch.nn.Linear(4, 2)))
model(torch.ones(2, 4))
pid = os.fork()
if pid == 0:
    model(torch.ones(2, 4))
    dump.close()  # and again at exit: the parent's dump either way
    sys.exit(0)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status))
print("incomplete after the child", os.path.exists(incomplete))
model(torch.ones(2, 4))
dump.close()
print("incomplete after close", os.path.exists(incomplete))
"""


@pytest.mark.parametrize("mode, synchronous", [("synchronous", True), ("asynchronous", False)])
def test_fork_dump(scratch, mode, synchronous):
    script = os.path.join(scratch, "fork.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.path.join(t.BUILD_DIR, "python"), OMP_NUM_THREADS="1")
    for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"):
        env.pop(key, None)
    dump = os.path.join(scratch, mode)
    cfg = t.write_config(os.path.join(scratch, mode + ".json"), dump, {"saved_data": "full"},
                         {"enable": synchronous})
    try:
        p = subprocess.run([sys.executable, script, cfg, dump], capture_output=True,
                           text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{mode}: the child or the parent hangs")
    assert p.returncode == 0 and "child exit 0\n" in p.stdout, \
        f"{mode}: the child exits 0: {p.returncode}\n{p.stdout}\n{p.stderr[-800:]}"
    assert "incomplete after the child True" in p.stdout, \
        f"{mode}: the child left the parent's INCOMPLETE: {p.stdout}"
    assert "incomplete after close False" in p.stdout, \
        f"{mode}: the parent's close removes it: {p.stdout}"
    iterations = sorted(os.path.basename(d) for d in
                        glob.glob(os.path.join(dump, "rank_0", "*", "0", "*")))
    assert iterations == ["0", "1"], f"{mode}: the parent's two calls, nothing of the child"
    for iteration in iterations:
        files = glob.glob(os.path.join(dump, "rank_0", "*", "0", iteration, "*.npy"))
        assert len(files) > 0, f"{mode}: iteration {iteration} dumped: {files}"
