"""graphdump.load, read, compare and watch from Python agree with the CLI (ls, compare --out,
watch --json) on the same dumps, made by graphdump python from the user's script."""
import io
import json

import numpy as np
import pandas as pd
import pytest

import graphdump
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
    assert result.first_divergence["kernel"] == report["first_failure"]["kernel"]
    # Attribution (docs/precision.md): the columns, the ranked contributors, the sources.
    for column in ("standard", "norm_rel_err", "error", "role", "input_error", "output_error",
                   "growth", "added_error", "adds_error", "contribution_rank"):
        assert column in result.table.columns
    assert result.table["adds_error"].dtype == bool
    assert result.contributors == report["contributors"] and result.contributors
    assert result.contributors[0]["contribution_rank"] == 1
    top = result.table[result.table.contribution_rank == 1]
    assert set(top.kernel_a) == {result.contributors[0]["kernel"]} and top.adds_error.all()
    flagged = set(result.table[result.table.adds_error].kernel_a)
    assert flagged == {c["kernel"] for c in result.contributors}
    assert result.first_divergence["kernel"] in flagged
    assert result.differing_sources == report["differing_sources"]
    assert result.differing_graph_inputs == report["differing_graph_inputs"]
    assert set(result.table.role) <= {"operator", "parameter", "constant"}
    assert "parameter" in set(result.table.role)
    assert not result.table[result.table.role != "operator"].adds_error.any()
    user = graphdump.compare(dumps["nan"], dumps["clean"], rtol=1e-3)
    assert set(user.table.standard) == {"user"}
    assert set(result.table.standard) - {""} <= {"float32", "exact", "float16", "bfloat16"}
    # The NaN entered at step 3: iteration 2 passes, the first divergence is in iteration 3.
    assert result.first_divergence["iteration"] == 3
    assert result.summary["error"] > 0
    table, first = result  # unpacks as (table, first divergence)
    assert first is result.first_divergence and table is result.table


def test_watch_is_the_cli_watch(dumps):
    hits = graphdump.watch(dumps["nan"], "nan,inf")
    report = json.loads(cli("watch", dumps["nan"], "--check", "nan,inf", "--json", "-q").stdout)
    assert len(hits) == len(report["hits"]) > 0
    assert hits.to_dict("records") == [{c: h[c] for c in hits.columns} for h in report["hits"]]
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
