"""A top-1 mixture of experts (eager_moe.py) whose routing differs in bfloat16, dumped by
`graphdump python` in float32 and in bfloat16: compare and replay judge every output of a
kernel, so topk's int64 indices that differ are the divergence, said in those words and ranked
first, and the shape mismatches that follow (nonzero, indexing) inherit (docs/precision.md,
"Discrete outputs"); the buffer `empty_like` returns is marked uninitialised in the graph files
and left out of compare and watch (docs/file-format.md); graphdump.read takes a row of load() in
any form pandas gives one (docs/python.md)."""
import json
import os
import re

import numpy as np
import pytest

import graphdump
from conftest import HERE, execution_order, graphdump as cli, write_config

MOE = os.path.join(HERE, "eager_moe.py")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moe")
    out = {}
    for dtype in ("float32", "bfloat16"):
        config = write_config(tmp / f"{dtype}.json", tmp / dtype)
        cli("python", "--config", config, MOE, dtype, tmp / f"{dtype}.npy", check=0)
        out[dtype] = tmp / dtype / "rank_0"
    return out


def kernel(rank_dir, op):
    names = [k for k in execution_order(rank_dir) if re.search(f"/{op}-op[0-9]+$", k)]
    assert names, execution_order(rank_dir)
    return names[0]


def output(rank_dir, op, slot):
    files = sorted(rank_dir.glob(f"*/*/0/{op}.*.output.{slot}.*.npy"))
    assert files, op
    return np.load(files[0])


def test_topk_indices_are_the_first_divergence_ranked_first(dumps):
    low, ref = dumps["bfloat16"], dumps["float32"]
    changed = int((output(low, "topk", 1) != output(ref, "topk", 1)).sum())
    assert changed > 50  # bfloat16 routes many of the 256 tokens elsewhere
    topk = kernel(low, "topk")
    p = cli("compare", low, ref, "--json", "-q", check=1)
    r = json.loads(p.stdout)
    assert r["first_adding_error"]["kernel"] == topk, r["first_adding_error"]["reason"]
    # Nothing after it adds error: every difference that follows comes from its choice (an
    # expert that got as many tokens in both runs, but others, is indexed by an index list the
    # dump does not hold).
    assert [c["kernel"] for c in r["contributors"]] == [topk], r["contributors"]
    assert f"{changed} of 256 indices differ" in r["first_adding_error"]["reason"]
    # nonzero's and indexing's shapes differ because topk chose otherwise: they inherit.
    shape_mismatch = [k for k in r["kernels"]
                      if any(t["shape_a"] != t["shape_b"] for t in k["tensors"]
                             if t["io"] == "output")]
    assert len(shape_mismatch) >= 4, [k["kernel_a"] for k in shape_mismatch]
    for k in shape_mismatch:
        assert not k["adds_error"] and k["verdict"] != "error", (k["kernel_a"], k["reason"])
    contributors = {c["kernel"] for c in r["contributors"]}
    assert not contributors & {k["kernel_a"] for k in shape_mismatch}


def test_replay_judges_the_index_output(dumps):
    low, ref = dumps["bfloat16"], dumps["float32"]
    changed = int((output(low, "topk", 1) != output(ref, "topk", 1)).sum())
    p = cli("replay", low, kernel(low, "topk"), "--reference", ref, "--json",
            env={"OMP_NUM_THREADS": "1"}, check=0)
    r = json.loads(p.stdout)
    assert r["output_slot"] == 1 and r["discrete"] and r["output_dtype"] == "int64", r
    assert r["discrete_changed"] == changed and r["discrete_elements"] == 256, r
    # compare finds topk making the change (its inputs carry only rounding): replay agrees.
    assert r["verdict"] == "ill-conditioned" and not r["discrete_upstream"], r["reason"]
    assert f"{changed} of 256 indices differ" in r["reason"], r["reason"]
    assert r["total"]["rel_l2"] == pytest.approx(r["discrete_changed"] / 256, abs=0.05), r


def test_uninitialized_buffer_is_marked_and_not_compared(dumps):
    low, ref = dumps["bfloat16"], dumps["float32"]
    empty, zero = kernel(ref, "empty_like"), kernel(ref, "zero_")
    ir = "".join(p.read_text() for p in sorted((ref / "graphs").glob("*.ir")))

    def block(name):
        return ir.split(f"# Fullname with scope: ({name})", 1)[1].split("# Fullname", 1)[0]

    assert "# Uninitialized: output 0" in block(empty)
    assert "# Uninitialized: input 0" in block(zero)
    r = json.loads(cli("compare", low, ref, "--json", "-q").stdout)
    tensors = {(k["kernel_a"], t["io"], t["slot"]): t for k in r["kernels"]
               for t in k["tensors"]}
    for key in ((empty, "output", 0), (zero, "input", 0)):
        assert tensors[key]["mode"] == "uninitialized", tensors[key]
    # watch checks every tensor file but those two.
    w = json.loads(cli("watch", ref, "--check", "nan,inf,large", "--json", "-q").stdout)
    files = list(ref.glob("*/*/0/*.npy"))
    assert w["tensors_checked"] == len(files) - 2, (w["tensors_checked"], len(files))
    assert not [h for h in w["hits"] if h["kernel"] in (empty, zero)], w["hits"]


def test_read_takes_a_row_in_any_pandas_form(dumps):
    frame = graphdump.load(dumps["float32"], kernels=[kernel(dumps["float32"], "topk")])
    rows = frame[(frame["io"] == "output") & (frame["slot"] == 1)]
    expected = np.load(rows.iloc[0]["file"])
    for row in (next(rows.itertuples()), next(rows.itertuples(index=False)),
                next(rows.iterrows()), rows, rows.iloc[0], rows.to_dict("records")[0]):
        np.testing.assert_array_equal(graphdump.read(row), expected)
    with pytest.raises(ValueError, match="DataFrame of 2 rows"):
        graphdump.read(frame[frame["io"] == "output"])
    with pytest.raises(ValueError, match="expected a row of load"):
        graphdump.read(next(rows.itertuples(name=None)))
