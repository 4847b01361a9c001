"""compare judges discrete outputs (docs/precision.md, "Discrete outputs"): indices that differ
are the divergence, said in those words and ranked first, and the shape mismatches that follow
from them inherit; memory nothing wrote (`empty_like`'s output) is left out of compare and watch
(docs/file-format.md); a 0-d tensor's bad element has a position.

The dumps are written with NumPy: a router's softmax, whose scores differ by rounding only; its
topk, whose indices differ for some tokens; `eq` and `nonzero` on those indices; indexing with
them (its output's shape differs); and a sum of the gathered rows."""
import json
import os

import numpy as np
import pytest

import analysis_dumps as ad
import gdtest

TOKENS, EXPERTS = 64, 4


def moe_kernels(probs):
    """The kernels of a top-1 router on scores `probs` (float32), as one run dumps them."""
    choice = probs.argmax(axis=1)[:, None].astype(np.int64)
    values = np.take_along_axis(probs, choice, axis=1)
    mask = choice[:, 0] == 0
    rows = np.nonzero(mask)[0].astype(np.int64)[:, None]
    picked = values[rows[:, 0]]
    buffer = np.full((TOKENS, 1), 7e18, np.float32)  # what the memory held before
    return [
        {"full_name": "Default/router-Router/softmax-op0", "inputs": [probs], "outputs": [probs]},
        {"full_name": "Default/router-Router/topk-op1", "inputs": [probs],
         "outputs": [values, choice],
         "source": ("/home/user/moe.py", 35, "weight, choice = torch.topk(probs, 1, dim=-1)")},
        {"full_name": "Default/eq-op2", "inputs": [choice], "outputs": [mask]},
        {"full_name": "Default/nonzero-op3", "inputs": [mask], "outputs": [rows]},
        {"full_name": "Default/index-op4", "inputs": [values], "outputs": [picked]},
        {"full_name": "Default/sum-op5", "inputs": [picked],
         "outputs": [picked.sum(keepdims=True).astype(np.float32)]},
        {"full_name": "Default/empty_like-op6", "inputs": [values], "outputs": [buffer]},
    ]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("discrete")
    rng = np.random.default_rng(3)
    # Scores of 4 experts nearly equal: rounding them to bfloat16 reorders some tokens'.
    logits = 1 + 1e-3 * rng.standard_normal((TOKENS, EXPERTS))
    probs = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32)
    bits = probs.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)
    ad.write_dump(str(tmp / "low"), {0: moe_kernels(rounded)})
    ad.write_dump(str(tmp / "ref"), {0: moe_kernels(probs)})
    return tmp / "low", tmp / "ref"


def compare_json(low, ref):
    p = ad.graphdump("compare", low, ref, "--json", "-q")
    assert p.returncode == 1, p.stderr
    return json.loads(p.stdout)


def output(dump, op, slot):
    return np.load(next(dump.glob(f"rank_0/Net/0/0/{op}.*.output.{slot}.*.npy")))


def test_differing_indices_are_the_divergence_ranked_first(dumps):
    low, ref = dumps
    changed = int((output(low, "topk", 1) != output(ref, "topk", 1)).sum())
    assert changed > 0
    r = compare_json(low, ref)
    kernels = {k["kernel_a"]: k for k in r["kernels"]}
    topk = kernels["Default/router-Router/topk-op1"]
    assert r["first_adding_error"]["kernel"] == topk["kernel_a"], r["first_adding_error"]
    assert [c["kernel"] for c in r["contributors"]] == [topk["kernel_a"]], r["contributors"]
    assert topk["discrete_divergence"] and topk["verdict"] == "error", topk["reason"]
    assert f"{changed} of {TOKENS} indices differ" in topk["reason"], topk["reason"]
    assert topk["discrete_change"] == f"output 1: {changed} of {TOKENS} indices differ"
    indices = next(t for t in topk["tensors"] if t["io"] == "output" and t["slot"] == 1)
    assert indices["discrete"] and indices["error"] == pytest.approx(changed / TOKENS)


def test_shape_mismatches_after_it_inherit(dumps):
    low, ref = dumps
    r = compare_json(low, ref)
    kernels = {k["kernel_a"]: k for k in r["kernels"]}
    assert output(low, "nonzero", 0).shape != output(ref, "nonzero", 0).shape
    for name in ("Default/eq-op2", "Default/nonzero-op3", "Default/index-op4",
                 "Default/sum-op5"):
        k = kernels[name]
        assert not k["adds_error"] and k["verdict"] == "warning", k
        assert k["reason"].startswith("inherits error"), k["reason"]
        assert k["error_origin"] == "Default/router-Router/topk-op1", k
    assert "shape" in kernels["Default/index-op4"]["discrete_change"]


def test_text_names_the_indices(dumps):
    low, ref = dumps
    changed = int((output(low, "topk", 1) != output(ref, "topk", 1)).sum())
    p = ad.graphdump("compare", low, ref, "-q")
    assert p.returncode == 1, p.stderr
    first = p.stdout.split("first divergence: ", 1)[1].splitlines()
    assert first[0].startswith("Default/router-Router/topk-op1"), first
    assert f"output 1: {changed} of {TOKENS} indices differ" in first[1], first
    ranked = p.stdout.split("kernels adding error", 1)[1].splitlines()[1]
    assert ranked.strip().startswith("1. it 0 #1 Default/router-Router/topk-op1"), ranked
    assert f"{changed} of {TOKENS} indices differ (a discrete divergence" in ranked, ranked


def test_uninitialized_output_is_neither_compared_nor_watched(dumps):
    low, ref = dumps
    r = compare_json(low, ref)
    empty = next(k for k in r["kernels"] if k["kernel_a"] == "Default/empty_like-op6")
    out = next(t for t in empty["tensors"] if t["io"] == "output")
    assert out["mode"] == "uninitialized" and out["verdict"] == "pass", out
    assert "uninitialised memory" in out["reason"], out
    assert output(low, "empty_like", 0).max() == np.float32(7e18)
    p = ad.graphdump("watch", low, "--check", "large", "--json", "-q")
    w = json.loads(p.stdout)
    files = len(list(low.glob("rank_0/Net/0/0/*.npy")))
    assert w["tensors_checked"] == files - 1, w["tensors_checked"]
    assert not [h for h in w["hits"] if "empty_like" in h["kernel"]], w["hits"]


def test_a_0d_tensor_has_a_position(tmp_path):
    loss = np.array(np.nan, np.float32)
    ad.write_dump(str(tmp_path), {0: [{"full_name": "Default/div-op0",
                                       "inputs": [np.array(0, np.float32)], "outputs": [loss]}]})
    p = ad.graphdump("watch", tmp_path, "--json", "-q")
    assert p.returncode == 1, p.stderr
    hit = json.loads(p.stdout)["hits"][0]
    assert hit["kernel"] == "Default/div-op0" and hit["first_index"] == [], hit
    assert np.isnan(loss[tuple(hit["first_index"])])
