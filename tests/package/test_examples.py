"""The examples docs/python.md shows (examples/python/), run the way it says, with their
configurations pointed into a temporary directory."""
import json
import os

import numpy as np

from conftest import SOURCE_DIR, BUILD_DIR, every_npy_loads, graphdump, python

EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")
PACKAGE = {"PYTHONPATH": os.path.join(BUILD_DIR, "python")}


def config_into(tmp_path, name):
    """examples/python/NAME with its dump path moved under tmp_path; returns (config, root)."""
    with open(os.path.join(EXAMPLES, name)) as f:
        config = json.load(f)
    root = tmp_path / name.replace(".json", "")
    config["common_dump_settings"]["path"] = str(root)
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return str(path), root


def test_train_then_analyse(tmp_path):
    config, root = config_into(tmp_path, "data_dump.json")
    run = graphdump("python", "--config", config, os.path.join(EXAMPLES, "train.py"), check=0)
    assert "epoch 0: loss" in run.stdout and "4 optimizer step(s)" in run.stderr
    net = root / "rank_0" / "Net" / "0"
    assert sorted(d for d in os.listdir(net) if d.isdigit()) == ["0", "3"]  # "iteration": "0|3"
    assert every_npy_loads(root) > 100
    out = python(os.path.join(EXAMPLES, "analyse.py"), root, env=PACKAGE, check=0).stdout
    assert "iterations [0, 3]" in out and "largest forward output: Default/" in out
    assert "no NaN or overflow" in out


def test_explicit(tmp_path):
    config, root = config_into(tmp_path, "data_dump_set_dump.json")
    out = python(os.path.join(EXAMPLES, "explicit.py"), config, env=PACKAGE, check=0).stdout
    assert "iteration 2: loss" in out and str(root / "rank_0") in out
    files = os.listdir(root / "rank_0" / "Net" / "0" / "1")
    kernels = {f.split(".")[1] for f in files if not f.startswith("Parameter.")}
    assert kernels and all("encoder" in k for k in kernels), kernels  # set_dump(model.encoder)
    # Nothing of the loss graph is marked: only its constants are written.
    assert os.listdir(root / "rank_0" / "Net" / "1") == ["constants"]


def test_ddp(tmp_path):
    config, root = config_into(tmp_path, "data_dump_ddp.json")
    run = graphdump("python", "--config", config, "--nproc", 2, os.path.join(EXAMPLES, "ddp.py"),
                    check=0)
    assert "[rank 1] rank 1: loss" in run.stdout
    for rank in (0, 1):
        files = os.listdir(root / f"rank_{rank}" / "Net" / "0" / "3")
        assert any(f.startswith("AllReduce.") for f in files)
    # Both ranks end with the same weights: the last update's outputs agree.
    last = [np.load(next(str(root / f"rank_{r}/Net/0/3" / f)
                         for f in sorted(os.listdir(root / f"rank_{r}" / "Net" / "0" / "3"))
                         if f.startswith("SGD.") and ".output.0." in f)) for r in (0, 1)]
    assert np.array_equal(last[0], last[1])
