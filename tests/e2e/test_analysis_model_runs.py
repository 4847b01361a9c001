"""The analysis tools over real model runs (graphdump train on small_cnn): identical runs
compare equal; a run whose data holds a NaN is caught by watch at the first kernel that reads
it and differs from the clean run from that kernel on; trace maps a script line to kernels."""
import json
import os

import numpy as np
import pytest

import gdmodels
import gdtest as t


def train(work, name, data):
    dump = os.path.join(work, name)
    cfg = t.write_config(os.path.join(work, name + ".json"), dump, {"iteration": "0|1"})
    t.run("train", gdmodels.model_path("small_cnn"), "--data", os.path.join(work, data + ".npy"),
          "--labels", os.path.join(work, "y.npy"), "--steps", "2", "--lr", "0.01",
          "--config", cfg, env=gdmodels.env_one_thread(), check=0)
    return dump


@pytest.fixture(scope="module")
def runs(module_scratch):
    """Two identical small_cnn training runs, a and b, and one whose data holds a NaN (each
    trained once for the module's tests)."""
    work = module_scratch
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    y = np.array([0, 3, 1, 4], dtype=np.int64)
    bad = x.copy()
    bad[1, 2, 3, 4] = np.nan
    for name, data in (("x", x), ("bad", bad)):
        np.save(os.path.join(work, name + ".npy"), data)
    np.save(os.path.join(work, "y.npy"), y)
    return {name: train(work, name, data) for name, data in (("a", "x"), ("b", "x"),
                                                             ("nan", "bad"))}


def test_identical_runs_compare_equal(runs):
    code, out, err = t.run("compare", runs["a"], runs["b"], "--json")
    assert code == 0, f"two identical training runs compare equal: {err[-400:]}"
    result = json.loads(out)
    assert json.dumps(result).count("Gradients/") > 0, "backward kernels are compared too"


def test_watch_finds_the_planted_nan_at_its_first_reader(runs):
    code, out, err = t.run("watch", runs["nan"], "--check", "nan")
    assert code == 1, "watch exits 1 on the planted NaN"
    first = [line for line in out.splitlines() if "first" in line.lower()]
    assert any("conv2d" in line and "iteration 0" in line for line in first), \
        f"first NaN hit is the first conv2d in iteration 0: {first} / {out[:800]}"
    code, out, err = t.run("watch", runs["a"], "--check", "nan,inf")
    assert code == 0, f"no hit on the clean run: {out[:400]}"


def test_runs_that_differ_in_their_data_only_add_no_error(runs):
    code, out, err = t.run("compare", runs["a"], runs["nan"], "--json")
    # The runs differ only through their data: reported, but no kernel adds error, so compare
    # exits 0 (it exits 1 only when a kernel adds error, docs/analysis.md).
    assert code == 0, "the NaN run differs from the clean one only in its data"
    # The NaN came with the data: the first conv2d's input 0 is a graph input that differs
    # (reported apart, docs/precision.md); every kernel after it inherits, none adds error.
    result = json.loads(out)
    graph_inputs = result["differing_graph_inputs"]
    assert (graph_inputs and "conv2d" in graph_inputs[0]["kernel"] and
            graph_inputs[0]["slot"] == 0 and graph_inputs[0]["iteration"] == 0), \
        f"the first differing graph input is the first conv2d's input 0: {graph_inputs}"
    assert result["first_adding_error"] is None and result["first_failure"] is None, \
        f"no kernel adds error: {result['first_adding_error']} {result['first_failure']}"
    conv = [k for k in result["kernels"] if k["kernel_a"] == graph_inputs[0]["kernel"] and
            k["iteration"] == 0][0]
    assert conv["verdict"] == "warning" and "inherits error" in conv["reason"], \
        f"the conv2d inherits the NaN: {conv['reason']}"


def test_trace_maps_a_script_line_to_kernels(runs):
    line = gdmodels.source_line("x = self.pool(F.relu(self.conv1(x)))")
    code, out, err = t.run("trace", runs["a"], f"make_models.py:{line}", "--json")
    assert code == 0, f"trace finds kernels for make_models.py:{line}: {err[-300:]}"
    assert "conv2d" in out and "relu" in out, f"trace lists conv2d and relu: {out[:600]}"
