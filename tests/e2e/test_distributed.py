"""Data-parallel training with `graphdump train --nproc 2` (gloo on CPU), checked from the dumps.

- 2 ranks, 3 steps of SGD on small_cnn with a batch of 8 rows (4 per rank):
  * the parameters (Parameter files, at the start of each step) and the optimizer kernels'
    outputs (the parameters after each step's update) are identical on both ranks;
  * they equal single-process training on the combined batch within rtol 1e-5, atol 1e-6 (the
    mean of two 4-row gradients and one 8-row gradient differ only by float32 rounding);
  * every AllReduce kernel's output equals the mean of its inputs on the two ranks (atol 1e-7),
    and both ranks' outputs are bitwise equal;
  * AllReduce kernels appear in the execution order after the backward kernels and before the
    optimizer kernels;
- support_device [1]: only rank_1 is written.
"""
import os
import re
import types

import numpy as np
import pytest

import gdtest

RTOL, ATOL = 1e-5, 1e-6
STEPS = 3


def make_model(work):
    model = os.path.join(work, "small_cnn.pt")
    import subprocess
    subprocess.run([gdtest.PYTHON, os.path.join(gdtest.SOURCE_DIR, "examples", "make_models.py"),
                    work, "small_cnn"], check=True, capture_output=True)
    return model


def make_data(work):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 3, 16, 16)).astype(np.float32)
    y = rng.integers(0, 5, size=8).astype(np.int64)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    return os.path.join(work, "x.npy"), os.path.join(work, "y.npy")


def load_iteration(directory):
    """{(op name without -op{N}, io, slot): array} for every .npy in an iteration directory."""
    out = {}
    for path in gdtest.files(os.path.join(directory, "*.npy")):
        parts = os.path.basename(path).split(".")
        op_type, op_name, io, slot = parts[0], parts[1], parts[5], int(parts[6])
        name = "Parameter:" + op_name if op_type == "Parameter" else re.sub(r"-op\d+$", "", op_name)
        key = (name, io, slot)
        out[key] = np.load(path)
    return out


def train(model, x, y, config, nproc=None, env=None):
    args = ["train", model, "--steps", STEPS, "--data", x, "--labels", y, "--lr", "0.1",
            "--config", config]
    if nproc:
        args += ["--nproc", nproc]
    return gdtest.run(*args, env=env)


@pytest.fixture(scope="module")
def runs(module_scratch):
    """The model and data, a single-process training run and a 2-rank one (made once)."""
    scratch = module_scratch
    model = make_model(scratch)
    x, y = make_data(scratch)
    # Reference: one process, the whole batch.
    single = os.path.join(scratch, "single")
    gdtest.write_config(os.path.join(scratch, "single.json"), single,
                        {"support_device": [0]})
    code, out, err = train(model, x, y, os.path.join(scratch, "single.json"))
    assert code == 0, f"single-process training exit code\n{out}\n{err}"

    dist = os.path.join(scratch, "dist")
    gdtest.write_config(os.path.join(scratch, "dist.json"), dist, {"support_device": [0, 1]})
    code, out, err = train(model, x, y, os.path.join(scratch, "dist.json"), nproc=2)
    assert code == 0, f"2-rank training exit code\n{out}\n{err}"
    assert "[rank 0]" in out and "[rank 1]" in out, f"output prefixed per rank:\n{out}"
    assert re.search(r"\[rank 1\] .*rows \[4, 8\)", out + err) is not None, \
        f"rank 1 reports its shard of rows [4, 8):\n{out}\n{err}"
    return types.SimpleNamespace(scratch=scratch, model=model, x=x, y=y, single=single, dist=dist)


def test_ranks_agree_with_each_other_and_with_one_process(runs):
    single, dist = runs.single, runs.dist
    for it in range(STEPS):
        ref = load_iteration(os.path.join(single, "rank_0", "Net", "0", str(it)))
        r0 = load_iteration(os.path.join(dist, "rank_0", "Net", "0", str(it)))
        r1 = load_iteration(os.path.join(dist, "rank_1", "Net", "0", str(it)))
        param_keys = sorted(k for k in r0 if k[0].startswith("Parameter:"))
        assert len(param_keys) >= 6, f"iteration {it}: parameter files found: {param_keys}"
        for k in param_keys:
            assert np.array_equal(r0[k], r1[k]), f"iteration {it}: {k[0]} differs across ranks"
            assert np.allclose(r0[k], ref[k], rtol=RTOL, atol=ATOL), \
                (f"iteration {it}: {k[0]} differs from single-process training: max |d| "
                 f"{np.abs(r0[k] - ref[k]).max()}")
        updates = sorted(k for k in r0 if "optimizer-SGD" in k[0] and k[1] == "output"
                         and k[2] == 0)
        assert len(updates) == len(param_keys), \
            f"iteration {it}: one optimizer kernel output per parameter: {updates}"
        for k in updates:
            assert np.array_equal(r0[k], r1[k]), \
                f"step {it}: updated {k[0]} differs across ranks"
            assert k in ref and np.allclose(r0[k], ref[k], rtol=RTOL, atol=ATOL), \
                f"step {it}: updated {k[0]} differs from single-process training"
        reduces = sorted({k[0] for k in r0 if k[0].endswith("AllReduce")})
        assert len(reduces) == len(param_keys), \
            f"iteration {it}: one AllReduce kernel per parameter: {reduces}"
        for name in reduces:
            a, b = r0[(name, "input", 0)], r1[(name, "input", 0)]
            o0, o1 = r0[(name, "output", 0)], r1[(name, "output", 0)]
            assert not np.array_equal(a, b), f"{name}: local gradients differ across ranks"
            assert np.array_equal(o0, o1), f"{name}: reduced gradients differ across ranks"
            assert np.allclose(o0, (a.astype(np.float64) + b) / 2, rtol=0, atol=1e-7), \
                f"{name}: output is not the mean of the inputs"



def test_allreduce_sits_between_backward_and_optimizer(runs):
    dist = runs.dist
    # AllReduce kernels sit between backward and optimizer kernels in the execution order.
    with open(os.path.join(dist, "rank_0", "execution_order",
                           "ms_execution_order_graph_0.csv")) as f:
        order = f.read().splitlines()[1:]
    first_reduce = min(i for i, n in enumerate(order) if "/AllReduce-op" in n)
    last_grad = max(i for i, n in enumerate(order) if n.startswith("Gradients/"))
    first_update = min(i for i, n in enumerate(order) if "/optimizer-" in n)
    assert last_grad < first_reduce < first_update, \
        (f"execution order: backward ({last_grad}) < AllReduce ({first_reduce}) < "
         f"optimizer ({first_update})")
    with open(os.path.join(dist, "rank_1", "execution_order",
                           "ms_global_execution_order_graph_0.csv")) as f:
        assert f.read().split() == ["0", "1", "2"], "rank 1 global execution order"



def test_support_device_selects_the_ranks_that_dump(runs):
    scratch, model, x, y = runs.scratch, runs.model, runs.x, runs.y
    only1 = os.path.join(scratch, "only1")
    gdtest.write_config(os.path.join(scratch, "only1.json"), only1, {"support_device": [1]})
    code, out, err = train(model, x, y, os.path.join(scratch, "only1.json"), nproc=2)
    assert code == 0, f"support_device [1] training exit code\n{out}\n{err}"
    assert sorted(os.listdir(only1)) == ["rank_1"], "ranks dumped with support_device [1]"
