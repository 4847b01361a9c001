"""A module called twice per step, its first call making NaN (sqrt of a negative): every call is a
tensor's identity in ls, watch, compare, trace and graphdump.load (docs/analysis.md, "Calls"),
with statistic.csv rows on the file of their call."""
import csv
import glob
import json
import os

import numpy as np
import pytest

import graphdump
from conftest import graphdump as cli
from conftest import write_config

SCRIPT = """\
import sys
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        y = torch.sqrt(x)  # model.py sqrt line
        return self.fc(y)


torch.manual_seed(0)
net = torch.jit.script(Net())
opt = torch.optim.SGD(net.parameters(), lr=0.1)
calls = int(sys.argv[1])
for step in range(2):
    bad = torch.ones(8, 3)
    bad[5] = -1.0  # row 5 of the batch: sqrt makes NaN there
    outs = [net(bad)] if calls == 2 else []
    outs.append(net(torch.ones(8, 3)))
    outs[-1].sum().backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("calls")
    script = tmp / "model.py"
    script.write_text(SCRIPT)
    out = {"tmp": tmp, "script": script}
    for name, saved, calls in (("full", "full", 2), ("stats", "statistic", 2),
                               ("once", "full", 1)):
        config = write_config(tmp / f"{name}.json", tmp / name,
                              {"saved_data": saved, "net_name": "net",
                               "statistic_category": ["max", "min", "l2norm", "nan count"]})
        cli("python", "--config", config, script, calls, check=0)
        out[name] = tmp / name
    return out


def sqrt_name(frame):
    names = sorted({k for k in frame.kernel if "sqrt" in k.lower() and "Gradients" not in k})
    assert len(names) == 1, names
    return names[0]


def statistic_rows(root):
    rows = []
    for path in glob.glob(os.path.join(str(root), "**", "statistic.csv"), recursive=True):
        with open(path) as f:
            rows += list(csv.DictReader(f))
    return rows


@pytest.mark.parametrize("name", ["full", "stats"])
def test_watch_finds_the_first_calls_nan(dumps, name):
    p = cli("watch", dumps[name], "--json")
    assert p.returncode == 1, p.stdout + p.stderr
    result = json.loads(p.stdout)
    first = result["first_hit"]
    assert "sqrt" in first["kernel"].lower() and first["io"] == "output"
    assert (first["iteration"], first["call"]) == (0, 0)
    assert first["detail"].startswith("3 NaN of 24 elements")
    # The second call of that kernel is clean: no hit names it.
    assert not [h for h in result["hits"] if h["kernel"] == first["kernel"] and h["call"] == 1]
    text = cli("watch", dumps[name]).stdout
    assert f"first hit: {first['kernel']} (rank 0, graph 0, iteration 0, call 0 of 2, output 0)" \
        in text, text


def test_load_has_a_row_per_call_with_its_own_statistics(dumps):
    frame = graphdump.load(dumps["full"])
    sqrt = frame[(frame.kernel == sqrt_name(frame)) & (frame.io == "output")]
    assert sorted(zip(sqrt.iteration, sqrt.call)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for _, row in sqrt.iterrows():
        array = np.load(row["file"])
        assert row["timestamp"] > 0
        assert f".{row['timestamp']}.output." in os.path.basename(row["file"])
        # statistic.csv's row is the one of this file's call.
        assert row["NaN Count"] == int(np.isnan(array).sum()) == (3 if row["call"] == 0 else 0)
    # Every file and every statistic.csv row is a row of load().
    files = glob.glob(os.path.join(str(dumps["full"]), "**", "*.npy"), recursive=True)
    assert sorted(frame.file[frame.file != ""]) == sorted(files)
    assert int(frame["NaN Count"].notna().sum()) == len(statistic_rows(dumps["full"]))


@pytest.mark.parametrize("name", ["full", "stats"])
def test_ls_counts_every_file_and_row(dumps, name):
    total = json.loads(cli("ls", dumps[name], "--json", check=0).stdout)["total"]
    files = glob.glob(os.path.join(str(dumps[name]), "**", "*.npy"), recursive=True)
    assert total["files"] == len(files)
    assert total["statistic_rows"] == len(statistic_rows(dumps[name]))
    if name == "stats":
        assert total["tensors"] == total["statistic_only"] == total["statistic_rows"]


def test_compare_pairs_calls_and_names_a_different_count(dumps):
    same = json.loads(cli("compare", dumps["full"], dumps["full"], "--json", "-q").stdout)
    calls = {(k["kernel_a"], k["iteration"], k["call"]) for k in same["kernels"]}
    sqrt = sqrt_name(graphdump.load(dumps["full"]))
    assert {(sqrt, 0, 0), (sqrt, 0, 1)} <= calls
    assert same["call_count_differences"] == [] and same["unpaired"] == []

    p = cli("compare", dumps["full"], dumps["once"], "--json", "-q")
    result = json.loads(p.stdout)
    diffs = {(d["kernel_a"], d["iteration"]): (d["calls_a"], d["calls_b"])
             for d in result["call_count_differences"]}
    assert diffs[(sqrt, 0)] == (2, 1)
    assert {"side": "A", "rank": 0, "graph_id": 0, "iteration": 0, "call": 1,
            "kernel": sqrt} in result["unpaired"]
    text = cli("compare", dumps["full"], dumps["once"], "-q").stdout
    assert f"calls differ: iteration 0 {sqrt}: 2 call(s) in A, 1 in B" in text, text
    # Call 0 of A (the NaN one) pairs with B's only call: the NaN positions differ there.
    pair = [k for k in result["kernels"] if k["kernel_a"] == sqrt and k["iteration"] == 0]
    assert [k["call"] for k in pair] == [0]


def test_trace_lists_each_call_and_one_iteration(dumps):
    p = cli("trace", dumps["full"], "model.py:11", "--iteration", "1", check=0)
    assert "iteration 1:" in p.stdout and "iteration 0:" not in p.stdout, p.stdout
    assert "call 0:" in p.stdout and "call 1:" in p.stdout, p.stdout
    bad = cli("trace", dumps["full"], "model.py:11", "--iteration", "7")
    assert bad.returncode == 2 and "--iteration 7" in bad.stderr and "0, 1" in bad.stderr


def test_watch_and_compare_say_where_the_nan_is(dumps):
    """The NaN of row 5 (sqrt of -1): its index in the shape and its batch row."""
    result = json.loads(cli("watch", dumps["full"], "--json").stdout)
    first = result["first_hit"]
    assert (first["first_index"], first["row"]) == ([5, 0], 5)
    assert first["detail"] == "3 NaN of 24 elements; first at [5, 0], row 5 (1 of 8 rows)"
    hits = graphdump.watch(dumps["full"])
    assert (hits.first_index[0], hits.row[0]) == ((5, 0), 5)
    assert hits.detail[0] == first["detail"]
    # Statistic-only tensors have no positions: the count is all watch can say.
    stats = json.loads(cli("watch", dumps["stats"], "--json").stdout)["first_hit"]
    assert (stats["first_index"], stats["row"], stats["detail"]) == \
        (None, None, "3 NaN of 24 elements")

    compared = json.loads(cli("compare", dumps["full"], dumps["once"], "--json", "-q").stdout)
    sqrt = sqrt_name(graphdump.load(dumps["full"]))
    kernel = [k for k in compared["kernels"] if k["kernel_a"] == sqrt and k["iteration"] == 0][0]
    out = [t for t in kernel["tensors"] if t["io"] == "output"][0]
    assert out["first_index"] == [5, 0]
    assert "first at [5, 0] (row 5, flat index 15)" in out["reason"], out["reason"]


def first_bad_index(array):
    """The first NaN's index in the shape, else the first infinity's (NumPy's own reading)."""
    for bad in (np.isnan(array), np.isinf(array)):
        flat = np.flatnonzero(bad.ravel(order="K" if array.flags.c_contiguous else "C"))
        if flat.size:
            return tuple(int(i) for i in np.unravel_index(flat[0], array.shape))
    return None


def test_load_says_where_each_tensors_first_bad_element_is(dumps):
    """load() gives every tensor file's first bad element as watch does: checked against NumPy
    for each file, and the NaN of row 5 against watch's hit."""
    frame = graphdump.load(dumps["full"])
    files = frame[frame.file != ""]
    for _, row in files.iterrows():
        array = np.load(row["file"])
        expected = first_bad_index(array) if array.dtype.kind in "fc" else None
        assert row["first_index"] == expected, (row["file"], row["first_index"], expected)
        assert row["row"] == (expected[0] if expected and array.ndim >= 2 else None), row["file"]
    bad = files[files.first_index.notna()]
    sqrt = sqrt_name(frame)
    # Only the first call's sqrt output holds NaN (3 of them, row 5), and what consumed it.
    assert set(zip(bad.kernel[bad.io == "output"], bad.call[bad.io == "output"])) >= \
        {(sqrt, 0)}
    first = bad[(bad.kernel == sqrt) & (bad.io == "output")]
    assert list(first.first_index) == [(5, 0), (5, 0)] and list(first.row) == [5, 5]
    assert list(first.iteration) == [0, 1]
    hits = graphdump.watch(dumps["full"])
    for _, hit in hits[hits.check == "nan"].iterrows():
        match = frame[(frame.file == hit["path"]) & (frame.io == hit["io"]) &
                      (frame.slot == hit["slot"])]
        assert len(match) == 1 and match.first_index.iloc[0] == hit["first_index"], hit["path"]
        assert match.row.iloc[0] == hit["row"]
    # Rows are ints or None, not a float column.
    assert all(r is None or isinstance(r, int) for r in frame.row)
    # Statistic-only tensors have no positions.
    stats = graphdump.load(dumps["stats"])
    assert stats.first_index.isna().all() and stats.row.isna().all()
    assert stats["NaN Count"].max() == 3
