"""A dump path that cannot be prepared at start stops the dump, not the training
(docs/reliability.md): /dev/null, a path through a regular file, a name over 255 bytes, and a
full disk (a tmpfs filled before the run). `run`, `train` and `graphdump python` warn once
naming why, run every step and exit with the training's own status; the rank directory is left
absent, so the next run into a writable path is not refused."""
import os

import gdmodels
import gdtest as t

MODEL = gdmodels.model_path("small_cnn")
ENV = dict(os.environ, **gdmodels.env_one_thread())
for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"):
    ENV.pop(key, None)

SCRIPT = """
import sys
import torch
model = torch.jit.script(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.ones(2, 4)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step + 1}/3", flush=True)
sys.exit(int(sys.argv[1]))
"""


def commands(work, cfg):
    """(what, argv after `graphdump`, expected exit status, text of the last step)."""
    script = os.path.join(work, "train.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    return [
        ("run", ["run", MODEL, "--input-shape", "2x3x16x16", "--steps", "2", "--config", cfg],
         0, "step 2/2"),
        ("train", ["train", MODEL, "--input-shape", "4x3x16x16", "--classes", "5", "--steps",
                   "3", "--config", cfg], 0, "step 3/3"),
        ("python", ["python", "--config", cfg, script, "0"], 0, "step 3/3"),
        ("python exiting 5", ["python", "--config", cfg, script, "5"], 5, "step 3/3"),
    ]


def check(what, code, out, err, expected_code, last_step, reason):
    assert code == expected_code and last_step in out, \
        f"{what}: every step runs, exit {expected_code}: {code}\n{out[-300:]}\n{err[-600:]}"
    warnings = [line for line in err.splitlines() if "dumping is off for this run" in line]
    assert len(warnings) == 1 and reason in warnings[0], \
        f"{what}: one warning saying '{reason}': {err[-800:]}"
    assert "Traceback" not in err and "so no kernel was dumped" not in err, \
        f"{what}: no traceback, no false warning: {err[-800:]}"


def test_dump_path_unwritable(scratch):
    file = os.path.join(scratch, "a_file")
    with open(file, "w") as f:
        f.write("not a directory\n")
    cases = [
        ("/dev/null", "/dev/null", "/dev/null exists and is not a directory"),
        ("a path through a regular file", os.path.join(file, "dump"),
         f"{file} exists and is not a directory"),
        ("a name over 255 bytes", os.path.join(scratch, "d" * 300), "File name too long"),
    ]
    for name, path, reason in cases:
        cfg = t.write_config(os.path.join(scratch, "c.json"), path)
        for what, argv, expected, last in commands(scratch, cfg):
            code, out, err = t.run(*argv, env=ENV)
            check(f"{name}, {what}", code, out, err, expected, last, reason)
    assert (sorted(os.listdir(scratch)) ==
            ["a_file", "c.json", "train.py"]), "nothing else was made in the scratch directory"

    # A full disk: the tmpfs is filled before the run starts.
    disk = os.path.join(scratch, "disk")
    for what, argv, expected, last in commands(scratch, os.path.join(scratch, "full.json")):
        t.write_config(os.path.join(scratch, "full.json"), os.path.join(disk, "dump"))
        command = (f"dd if=/dev/zero of={disk}/fill bs=4k 2>/dev/null; "
                   + " ".join([t.BIN, *argv, f">{scratch}/out 2>{scratch}/err"]))
        p = t.in_small_tmpfs(scratch, "256k", command, ENV)
        if p is None:
            break
        with open(os.path.join(scratch, "out")) as f:
            out = f.read()
        with open(os.path.join(scratch, "err")) as f:
            err = f.read()
        check(f"full disk, {what}", p.returncode, out, err, expected, last,
              "No space left on device")
        copy = os.path.join(scratch, "copy")
        left = os.path.join(copy, "dump", "rank_0")
        assert os.path.isdir(os.path.join(copy, "dump")) and not os.path.exists(left), \
            (f"full disk, {what}: the rank directory it made is removed: "
             f"{os.listdir(os.path.join(copy, 'dump'))}")
        t.cleanup(copy)
