"""`graphdump replay` on eager dumps (docs/precision.md, "Replay"): the graph files `graphdump
python` writes for an unscripted script record each call's schema and arguments, so every
kernel of the model replays bit for bit from its dumped inputs, alone and against a reference
dump (the same model under TorchScript), and graphdump.replay gives the CLI's answer."""
import json

import numpy as np
import pytest

from conftest import HERE, execution_order, graphdump, write_config

import os

SMALL = os.path.join(HERE, "eager_small.py")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eager_replay")
    out = {}
    for mode in ("forward", "scripted"):
        config = write_config(tmp / f"{mode}.json", tmp / mode)
        graphdump("python", "--config", config, SMALL, mode, check=0)
        out[mode] = tmp / mode / "rank_0"
    return out


def replay(*args):
    p = graphdump("replay", *map(str, args), "--json", env={"OMP_NUM_THREADS": "1"})
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def test_every_model_kernel_of_an_eager_dump_replays(dumps):
    eager = dumps["forward"]
    model = [k for k in execution_order(eager) if not k.startswith("Default/script/")]
    assert len(model) == 5
    for kernel in model:
        code, r, err = replay(eager, kernel)
        assert code == 0, err
        assert r["replayable"] and r["reproduces"] and r["reproduce_max_abs"] == 0, r
        assert r["schema"].startswith("aten::"), r["schema"]
        assert r["dtype"] == "float32" and r["verdict"] == "accurate", r["reason"]
        assert "eager_small.py:" in r["source"], r["source"]


def test_eager_replay_against_a_reference(dumps):
    eager, scripted = dumps["forward"], dumps["scripted"]
    kernel = "Default/norm-LayerNorm/layer_norm-op3"
    code, r, err = replay(eager, kernel, "--reference", scripted)
    assert code == 0, err
    # The same float32 model: the inputs agree, nothing is inherited.
    assert r["verdict"] == "accurate" and r["input_difference"] == 0, r
    assert r["inherited"]["rel_l2"] == 0 and r["conditioning"]["rel_l2"] == 0, r


def test_graphdump_replay_on_an_eager_dump(dumps):
    graphdump_module = pytest.importorskip("graphdump")
    eager = dumps["forward"]
    kernel = "Default/features-Sequential/1-Tanh/tanh-op1"
    code, cli, err = replay(eager, kernel)
    api = graphdump_module.replay(eager, kernel)
    assert code == 0 and api["verdict"] == cli["verdict"] == "accurate", (api, cli)
    assert api["own"] == cli["own"] and api["reproduces"], api
    x = np.load(next(eager.glob("Net/0/0/tanh.*.input.0.*.npy")))
    y = np.load(next(eager.glob("Net/0/0/tanh.*.output.0.*.npy")))
    exact = np.tanh(x.astype(np.float64))
    assert abs(api["own"]["rel_l2"] - np.linalg.norm(y - exact) / np.linalg.norm(exact)) < 1e-9
