"""saved_data "statistic" reuses the statistics of bytes already reduced in a step (a kernel's
output read again as the next kernel's input, a weight read by several kernels, the copy of an
input taken before an in-place kernel). Reused rows must equal rows computed from the bytes:
the same training with saved_data "full" (every row computed while writing the .npy files,
nothing reused) gives the same statistic.csv, value for value. Covers in-place ReLU, Adam's
state, and the gradients a 2-rank AllReduce rewrites through raw pointers."""
import csv
import os
import sys

import numpy as np
import pytest

import gdmodels
import gdtest

CATEGORIES = ["max", "min", "avg", "l2norm"]


def rows(root):
    """{iteration dir: [row without the timestamp]} for every statistic.csv under `root`."""
    out = {}
    for path in gdtest.files(os.path.join(root, "**", "statistic.csv")):
        with open(path) as f:
            table = list(csv.reader(f))
        assert len(table) > 1, f"{path}: rows"
        out[os.path.relpath(os.path.dirname(path), root)] = [r[:4] + r[5:] for r in table[1:]]
    return out


def train(work, name, saved, args):
    cfg = gdtest.write_config(os.path.join(work, name + ".json"), os.path.join(work, name),
                              {"saved_data": saved, "statistic_category": CATEGORIES})
    gdtest.run("train", *args, "--config", cfg, env=gdmodels.env_one_thread(), check=0)
    return rows(os.path.join(work, name))


def compare(label, reused, computed):
    assert sorted(reused) == sorted(computed), f"{label}: iteration directories"
    for it in computed:
        a, b = reused.get(it, []), computed[it]
        assert len(a) == len(b), f"{label} {it}: row count: got {len(a)}, expected {len(b)}"
        bad = [(x, y) for x, y in zip(a, b) if x != y]
        assert not bad, f"{label} {it}: {len(bad)} rows differ, first: {bad[:1]}"


def data(work, rng, name, shape, classes):
    np.save(os.path.join(work, name + "_x.npy"), rng.standard_normal(shape).astype(np.float32))
    np.save(os.path.join(work, name + "_y.npy"),
            rng.integers(0, classes, size=shape[0]).astype(np.int64))
    return ["--data", os.path.join(work, name + "_x.npy"), "--labels",
            os.path.join(work, name + "_y.npy"), "--steps", "3"]


def test_alexnet_adam_reused_rows_equal_computed_ones(module_scratch):
    alexnet = [gdmodels.model_path("demo_alexnet"),
               *data(module_scratch, np.random.default_rng(5), "a", (8, 3, 64, 64), 10),
               "--classes", "10", "--optimizer", "adam"]
    reused = train(module_scratch, "stat", "statistic", alexnet)
    compare("alexnet adam", reused, train(module_scratch, "full", "full", alexnet))
    relu_inputs = [r for it in reused.values() for r in it
                   if r[0] == "relu_" and r[4] == "input"]
    assert len(relu_inputs) > 0, "in-place relu_ inputs are in the statistics"


def test_two_ranks_reused_rows_equal_computed_ones(module_scratch):
    ranks = [gdmodels.model_path("small_cnn"),
             *data(module_scratch, np.random.default_rng(6), "s", (8, 3, 16, 16), 5),
             "--nproc", "2"]
    reused = train(module_scratch, "stat2", "statistic", ranks)
    computed = train(module_scratch, "full2", "full", ranks)
    compare("2 ranks", reused, computed)
    assert any(r[0] == "AllReduce" for it in computed.values() for r in it), (
        "AllReduce kernels are in the statistics")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
