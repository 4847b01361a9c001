"""graphdump.load, read, compare and watch from Python agree with the CLI (ls, compare --out,
watch --json) on the same dumps, made by graphdump python from the user's script."""
import io
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest
import torch

import graphdump
from conftest import BIN
from conftest import graphdump as cli
from conftest import write_config


@pytest.fixture(scope="module")
def dumps(tmp_path_factory, user_train):
    """A clean run and one whose step 3 input holds a NaN, both with tensors and statistics."""
    tmp = tmp_path_factory.mktemp("analysis")
    out = {}
    for name, extra in (("clean", []), ("nan", ["--nan-at", "3"])):
        config = write_config(tmp / f"{name}.json", tmp / name,
                              {"saved_data": "full", "iteration": "2-4"})
        cli("python", "--config", config, user_train, tmp / f"{name}.npz", "--epochs", "1",
            *extra, check=0)
        out[name] = tmp / name
    out["tmp"] = tmp
    return out


def test_load_lists_what_ls_lists(dumps):
    frame = graphdump.load(dumps["clean"])
    listing = json.loads(cli("ls", dumps["clean"], "--json", "--kernels", check=0).stdout)
    expected = set()
    for rank in listing["ranks"]:
        for graph in rank["graphs"]:
            for it in graph["iterations"]:
                for kernel in it["kernel_list"]:
                    for f in kernel["files"]:
                        iteration = -1 if it["iteration"] == "constants" else it["iteration"]
                        expected.add((iteration, kernel["full_name"], f))
    got = {(int(r.iteration), r.kernel, r.file) for r in frame.itertuples()}
    assert got == expected and len(got) > 300
    assert set(frame.iteration) == {2, 3, 4, -1}  # -1: constants/
    # Statistics columns come from statistic.csv, numeric; shapes are tuples.
    row = frame[frame.kernel.str.startswith("Default/head-Linear/linear-op") &
                (frame.io == "output") & (frame.iteration == 3)].iloc[0]
    array = graphdump.read(row)
    assert array.shape == row["shape"] == (8, 3)
    assert row["Max Value"] == pytest.approx(float(array.max()), rel=1e-5)
    assert row["L2Norm Value"] == pytest.approx(float(np.linalg.norm(array.astype(np.float64))),
                                                rel=1e-5)
    assert "user_train.py:" in row.source or "/linear.py:" in row.source
    assert np.array_equal(graphdump.read(row.file), np.load(row.file))
    assert graphdump.read(row, as_torch=True).shape == (8, 3)


def test_compare_is_the_cli_table(dumps, tmp_path):
    result = graphdump.compare(dumps["nan"], dumps["clean"])
    cli("compare", dumps["nan"], dumps["clean"], "--out", tmp_path / "out.csv", "-q")
    expected = pd.read_csv(tmp_path / "out.csv", keep_default_na=False,
                           na_values={c: [""] for c in graphdump._NUMERIC_COMPARE_COLUMNS})
    pd.testing.assert_frame_equal(result.table, expected)
    report = json.loads(cli("compare", dumps["nan"], dumps["clean"], "--json", "-q").stdout)
    assert result.first_divergence == report["first_adding_error"]
    # The NaN came with step 3's data: a graph input that differs, reported apart
    # (docs/precision.md); iteration 2 passes, and no kernel adds error, every one inherits.
    assert result.differing_graph_inputs == report["differing_graph_inputs"]
    assert result.differing_graph_inputs[0]["iteration"] == 3
    assert result.first_divergence is None and result.contributors == []
    assert result.summary["warning"] > 0
    assert (result.table[result.table.iteration == 2].kernel_verdict == "pass").all()
    table, first = result  # unpacks as (table, first divergence)
    assert first is result.first_divergence and table is result.table


def test_compare_attributes_the_error_to_the_kernel_that_adds_it(tmp_path):
    """sum_net in float32 and bfloat16 (tests/e2e/precision_models.py): the bfloat16 index_add
    adds the error; Python returns what compare --json and --out say about it."""
    import precision_fixture as p
    dumps = {}
    for name, extra in (("fp32", []), ("bf16", ["--precision", "bf16"])):
        config = write_config(tmp_path / f"{name}.json", tmp_path / name, {"net_name": "Net"})
        cli("run", p.model("sum_net"), "--input", p.data("sum_x.npy"), "--config", config,
            *extra, check=0)
        dumps[name] = tmp_path / name
    add = p.find(p.kernel_names(tmp_path / "fp32" / "rank_0"), "index_add")
    result = graphdump.compare(dumps["bf16"], dumps["fp32"])
    report = json.loads(cli("compare", dumps["bf16"], dumps["fp32"], "--json", "-q").stdout)
    assert result.first_divergence == report["first_adding_error"]
    assert result.first_divergence["kernel"] == add
    assert result.first_divergence["source_line"].endswith(
        f"precision_models.py:{p.source_line('SUM_LINE')}")
    assert result.contributors == report["contributors"]
    assert [c["kernel"] for c in result.contributors] == [add]
    assert result.contributors[0]["contribution_rank"] == 1
    assert result.contributors[0]["growth"] >= 10
    assert result.differing_sources == [] and result.differing_graph_inputs == []
    table = result.table
    for column in ("standard", "norm_rel_err", "error", "role", "input_error", "output_error",
                   "growth", "added_error", "adds_error", "contribution_rank"):
        assert column in table.columns
    assert table["adds_error"].dtype == bool
    assert set(table[table.adds_error].kernel_a) == {add}
    assert set(table[table.contribution_rank == 1].kernel_a) == {add}
    rows = table[table.kernel_a == add]
    # Its index (int64) is compared exactly, its floating tensors by the bfloat16 standard.
    assert list(rows.standard[rows.dtype_b == "int64"]) == ["exact"]
    assert (rows.standard[rows.dtype_b != "int64"] == "bfloat16").all()
    assert rows.growth.iloc[0] == pytest.approx(
        rows.output_error.iloc[0] / max(rows.input_error.iloc[0], 2 ** -8))
    assert {"operator", "parameter"} <= set(table.role) <= {"operator", "parameter", "constant"}
    assert not table[table.role != "operator"].adds_error.any()
    cli("compare", dumps["bf16"], dumps["fp32"], "--out", tmp_path / "out.csv", "-q")
    expected = pd.read_csv(tmp_path / "out.csv", keep_default_na=False,
                           na_values={c: [""] for c in graphdump._NUMERIC_COMPARE_COLUMNS})
    pd.testing.assert_frame_equal(table, expected)
    # atol/rtol switch every pair to the elementwise rule: standard "user".
    user = graphdump.compare(dumps["bf16"], dumps["fp32"], atol=1e-2, rtol=1e-2)
    assert set(user.table.standard) == {"user"}
    # replay: the sum computes inaccurately in bfloat16; Python returns what the CLI prints.
    replayed = graphdump.replay(dumps["bf16"], add, reference=dumps["fp32"])
    printed = json.loads(cli("replay", dumps["bf16"], add, "--reference", dumps["fp32"],
                             "--json").stdout)
    assert replayed == printed
    assert replayed["verdict"] == "inaccurate" and replayed["reproduces"]
    assert replayed["own"]["rel_l2"] > 10 * replayed["rounding"]
    with pytest.raises((ValueError, FileNotFoundError), match="no_such_kernel"):
        graphdump.replay(dumps["bf16"], "no_such_kernel")
    with pytest.raises(ValueError, match="iteration"):
        graphdump.replay(dumps["bf16"], add, iteration=-1)


def first_row_is_int(hits):
    return all(r is None or isinstance(r, int) for r in hits.row)


def test_watch_is_the_cli_watch(dumps):
    hits = graphdump.watch(dumps["nan"], "nan,inf")
    report = json.loads(cli("watch", dumps["nan"], "--check", "nan,inf", "--json", "-q").stdout)
    assert len(hits) == len(report["hits"]) > 0
    # first_index: a tuple in Python (as load()'s shapes), a list in JSON.
    expected = [{c: tuple(h[c]) if c == "first_index" and h[c] is not None else h[c]
                 for c in hits.columns} for h in report["hits"]]
    assert hits.to_dict("records") == expected
    assert first_row_is_int(hits)
    first = hits.iloc[0]
    assert first.iteration == 3 and first.check == "nan"
    assert graphdump.watch(dumps["clean"]).empty


def test_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        graphdump.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a dump directory"):
        graphdump.load(tmp_path / "empty")
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(ValueError, match="bad.npy"):
        graphdump.read(bad)
    with pytest.raises(ValueError, match="unknown watch check|allowed"):
        graphdump.watch(tmp_path, "nonsense")


@pytest.fixture(scope="module")
def odd_dumps(tmp_path_factory):
    """Dump A's names hold bytes that are not UTF-8 (a tensor file name, a statistic.csv field,
    the .ir's source path) and one raw bfloat16 file ('<E2'); B is the same net, plain."""
    import analysis_dumps as d
    tmp = tmp_path_factory.mktemp("odd")
    net = d.simple_net(n=3, size=(64, 32))
    a, b = tmp / "a", tmp / "b"
    d.write_dump(a, {0: net}, stats=True)
    d.write_dump(b, {0: net}, stats=True)
    step = os.fsencode(a / "rank_0" / "Net" / "0" / "0")
    [odd] = [n for n in os.listdir(step) if b"layer1" in n and b".output.0." in n]
    odd_file = os.path.join(step, odd.replace(b"layer1", b"layer\xff1"))
    os.rename(os.path.join(step, odd), odd_file)
    csv = os.path.join(step, b"statistic.csv")
    with open(csv, "rb") as f:
        text = f.read()
    with open(csv, "wb") as f:
        f.write(text.replace(b"layer2", b"layer\xfe2"))
    ir = a / "rank_0" / "graphs" / "ms_output_trace_code_graph_0.ir"
    ir.write_bytes(ir.read_bytes().replace(b"/home/user/project/", b"/home/us\xe9r/"))
    # layer0's output as raw bfloat16: the float32 values' upper halves, descr '<E2'.
    [raw] = [n for n in os.listdir(step) if b"layer0" in n and b".output.0." in n]
    values = net[0]["outputs"][0]
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)
    os.remove(os.path.join(step, raw))
    raw_file = os.path.join(step, raw.replace(b".float32.npy", b".bfloat16.npy"))
    np.save(os.fsdecode(raw_file), bits)
    with open(raw_file, "r+b") as f:
        header = f.read(128)
        f.seek(header.index(b"'<u2'"))
        f.write(b"'<E2'")
    return {"a": a, "b": b, "odd_file": odd_file, "raw_file": raw_file, "bits": bits}


def test_names_that_are_not_utf8_are_replaced_as_the_cli_replaces_them(odd_dumps, tmp_path):
    """load, compare and read raised UnicodeDecodeError on one such byte."""
    a, b = odd_dumps["a"], odd_dumps["b"]
    frame = graphdump.load(a)
    listing = json.loads(cli("ls", a, "--json", "--kernels", check=0).stdout)
    names = {k["full_name"] for r in listing["ranks"] for g in r["graphs"]
             for it in g["iterations"] for k in it["kernel_list"]}
    assert set(frame.kernel) == names
    assert any("layer\ufffd2" in k for k in frame.kernel), sorted(frame.kernel)
    sources = set(frame.source) - {""}
    assert "/home/us\ufffdr/model.py:10" in sources, sources
    assert all(s.startswith("/home/us\ufffdr/model.py:") for s in sources), sources
    # A file path keeps its bytes (os.fsdecode), so read() opens it.
    [row] = [r for _, r in frame.iterrows() if os.fsencode(r.file) == odd_dumps["odd_file"]]
    assert "layer\ufffd1" in row.kernel
    assert np.array_equal(graphdump.read(row), np.load(odd_dumps["odd_file"]))
    assert np.array_equal(graphdump.read(row.file), np.load(odd_dumps["odd_file"]))
    # compare: the CLI's --out table, its bytes decoded with U+FFFD for what is not UTF-8.
    result = graphdump.compare(a, b)
    # (bytes out: its text report prints the names as they are)
    subprocess.run([BIN, "compare", a, b, "--out", tmp_path / "out.csv", "-q"],
                   capture_output=True, check=True)
    expected = pd.read_csv(tmp_path / "out.csv", keep_default_na=False, encoding_errors="replace",
                           na_values={c: [""] for c in graphdump._NUMERIC_COMPARE_COLUMNS})
    pd.testing.assert_frame_equal(result.table, expected)
    report = json.loads(subprocess.run([BIN, "compare", a, b, "--json", "-q"],
                                       capture_output=True).stdout.decode("utf-8"))
    assert result.unpaired == report["unpaired"]
    assert any("layer\ufffd1" in u["kernel"] for u in result.unpaired), result.unpaired


def test_read_widens_raw_bfloat16_to_float32(odd_dumps):
    """read() raised TypeError: data type '<E2' not understood."""
    frame = graphdump.load(odd_dumps["a"])
    [row] = [r for _, r in frame.iterrows() if os.fsencode(r.file) == odd_dumps["raw_file"]]
    array = graphdump.read(row)
    expected = (odd_dumps["bits"].astype(np.uint32) << 16).view(np.float32)
    assert array.dtype == np.float32 and array.shape == (64, 32)
    assert np.array_equal(array, expected)
    assert graphdump.read(row, as_torch=True).dtype == torch.float32
