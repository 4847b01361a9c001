"""graphdump.load's filters (ranks=, iterations=, kernels= as names or a regular expression,
io=), applied while the dump is read, and its compact columns: statistic.csv's column order,
categorical names, numeric statistics. The dump is written here as text (statistics only)."""
import os

import pandas as pd
import pytest

import graphdump  # noqa: F401  (conftest puts the build's package first)
from conftest import statistic_csv

RANKS = 3
KERNELS = ["Default/net-Net/MatMul-op0", "Default/net-Net/Add-op1",
           "Default/net-Net/AllReduce-op2", "Default/net-Net/Tanh-op3"]
# Not the alphabetical order: load keeps the file's.
TITLES = ["Min Value", "Max Value", "NaN Count", "Avg Value", "MD5"]


def cells(rank, iteration, kernel, io):
    """Every statistic tells where its row came from."""
    base = 1000 * rank + 100 * iteration + 10 * kernel + (io == "output")
    return f"{-base},{base},{rank},{base / 4},md5-{base}"


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    root = tmp_path_factory.mktemp("filters") / "dump"
    for rank in range(RANKS):
        order = root / f"rank_{rank}" / "execution_order"
        order.mkdir(parents=True)
        (order / "ms_execution_order_graph_0.csv").write_text(
            "NodeExecutionOrder-FullNameWithScope\n" + "".join(k + "\n" for k in KERNELS))
        for iteration in (0, 1, 2):
            it = root / f"rank_{rank}" / "Net" / "0" / str(iteration)
            it.mkdir(parents=True)
            (it / "statistic.csv").write_text(statistic_csv(
                KERNELS, TITLES, lambda k, io: cells(rank, iteration, k, io)))
    return str(root)


def rows(frame):
    return sorted(zip(frame["rank"], frame.iteration, frame.kernel, frame.io))


def test_no_filter_has_every_row_with_statistics_in_file_order(dump):
    frame = graphdump.load(dump)
    assert len(frame) == RANKS * 3 * len(KERNELS) * 2
    assert list(frame.columns[-5:]) == ["Min Value", "Max Value", "NaN Count", "Avg Value", "MD5"]
    # Each row's statistics are its own.
    for r in frame.itertuples(index=False):
        k = KERNELS.index(r.kernel)
        expected = cells(r.rank, r.iteration, k, r.io).split(",")
        assert [r[-5], r[-4], r[-3], r[-2], r[-1]] == [
            int(expected[0]), int(expected[1]), int(expected[2]), float(expected[3]), expected[4]]
    assert str(frame["Max Value"].dtype) == "int64" and str(frame["Avg Value"].dtype) == "float64"
    # Text: pandas 3 (the project's) holds a column of strings as its `str` dtype, where pandas 2
    # kept NumPy objects.
    assert pd.api.types.is_string_dtype(frame["MD5"]) and set(map(type, frame["MD5"])) == {str}
    for name in ("kernel", "op_type", "io", "dtype", "net_name", "source"):
        assert str(frame[name].dtype) == "category", name
    assert set(frame.file) == {""} and set(frame.op_type) == {"MatMul", "Add", "AllReduce", "Tanh"}
    assert frame["shape"].iloc[0] == (4, 4) and list(frame.order.unique()) == [0, 1, 2, 3]


def test_ranks_and_iterations_keep_only_what_they_name(dump):
    everything = rows(graphdump.load(dump))
    one = graphdump.load(dump, ranks=1)
    assert set(one["rank"]) == {1} and rows(one) == [r for r in everything if r[0] == 1]
    two = graphdump.load(dump, ranks=[0, 2], iterations=[2])
    assert rows(two) == [r for r in everything if r[0] in (0, 2) and r[1] == 2]
    assert (two["Max Value"] >= 200).all()


def test_kernels_by_name_and_by_regex(dump):
    everything = rows(graphdump.load(dump))
    named = graphdump.load(dump, kernels=[KERNELS[1], KERNELS[3]])
    assert rows(named) == [r for r in everything if r[2] in (KERNELS[1], KERNELS[3])]
    matched = graphdump.load(dump, kernels=r"AllReduce|Tanh-op\d$")
    assert rows(matched) == [r for r in everything if r[2] in (KERNELS[2], KERNELS[3])]
    # The order column is the execution order's, whatever is left out.
    assert set(matched.order) == {2, 3}
    assert len(graphdump.load(dump, kernels=["no such kernel"])) == 0


def test_io(dump):
    everything = rows(graphdump.load(dump))
    inputs = graphdump.load(dump, io="input", ranks=0)
    assert rows(inputs) == [r for r in everything if r[3] == "input" and r[0] == 0]
    assert (graphdump.load(dump, io="output")["Max Value"] % 2 == 1).all()


def test_bad_filters_are_clear_errors(dump):
    with pytest.raises(ValueError, match=r"kernels='Add\(' is not a regular expression"):
        graphdump.load(dump, kernels="Add(")
    with pytest.raises(ValueError, match=r"io='outputs' \(allowed: 'input', 'output'\)"):
        graphdump.load(dump, io="outputs")
    with pytest.raises(ValueError, match=r"rank 7 is not in .* \(ranks found: 0, 1, 2\)"):
        graphdump.load(dump, ranks=[0, 7])
    with pytest.raises(ValueError, match=r"iterations=\['1'\]: '1' is not a"):
        graphdump.load(dump, iterations=["1"])
    with pytest.raises(FileNotFoundError):
        graphdump.load(os.path.join(dump, "missing"), ranks=0)
