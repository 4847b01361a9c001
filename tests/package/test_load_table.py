"""graphdump.load's table as compact columns, rank after rank: a statistic column is int64 while
every rank's cells are ints, float64 once one rank has a float or lacks the column (NaN there),
objects once one has text (each cell as it was: int, float or str, an int too wide for a double
exactly); the columns are the arrays the index filled (one block each, not copied together);
and loading one rank reads only that rank's directory, however many ranks the dump has."""
import os

import numpy
import pytest

import graphdump  # noqa: F401  (conftest puts the build's package first)
from conftest import statistic_csv

KERNELS = ["Default/net-Net/MatMul-op0", "Default/net-Net/Add-op1"]
WIDE = 2**53 + 1  # not a double


def write_rank(root, rank, titles, cells):
    """rank_{rank} with one statistic.csv: `cells(kernel, io)` gives the row's statistics."""
    rank_dir = root / f"rank_{rank}"
    (rank_dir / "execution_order").mkdir(parents=True)
    (rank_dir / "execution_order" / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\n" + "".join(k + "\n" for k in KERNELS))
    it = rank_dir / "Net" / "0" / "0"
    it.mkdir(parents=True)
    (it / "statistic.csv").write_text(statistic_csv(KERNELS, titles, cells))


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    root = tmp_path_factory.mktemp("table") / "dump"
    # Ints: ints in every rank. Mixed: ints, then a float in rank 1. Late: only in rank 1.
    # Text: an int, a wide int and a float before rank 2's text.
    write_rank(root, 0, ["Ints", "Mixed", "Text"],
               lambda k, io: f"{k},{k},{WIDE if io == 'input' else k}")
    write_rank(root, 1, ["Ints", "Mixed", "Late", "Text"],
               lambda k, io: f"{k + 10},{k}.5,{k},{k}.25")
    write_rank(root, 2, ["Text", "Ints", "Mixed"], lambda k, io: f"md5-{k},{k + 20},{k + 20}")
    return root


def test_statistic_columns_widen_as_later_ranks_need(dump):
    frame = graphdump.load(dump)
    assert len(frame) == 12 and list(frame["rank"]) == [0] * 4 + [1] * 4 + [2] * 4
    # The file's column order, then columns in the order first met.
    assert list(frame.columns[-4:]) == ["Ints", "Mixed", "Text", "Late"]
    assert frame["Ints"].dtype == numpy.int64
    assert list(frame["Ints"]) == [0, 0, 1, 1, 10, 10, 11, 11, 20, 20, 21, 21]
    assert frame["Mixed"].dtype == numpy.float64
    assert list(frame["Mixed"]) == [0, 0, 1, 1, 0.5, 0.5, 1.5, 1.5, 20, 20, 21, 21]
    late = frame["Late"]
    assert late.dtype == numpy.float64 and late.isna().tolist() == [True] * 4 + [False] * 4 + [
        True] * 4 and list(late[4:8]) == [0, 0, 1, 1]
    text = frame["Text"]
    assert text.dtype == object
    assert [(type(v).__name__, v) for v in text[:8]] == [
        ("int", WIDE), ("int", 0), ("int", WIDE), ("int", 1),
        ("float", 0.25), ("float", 0.25), ("float", 1.25), ("float", 1.25)]
    assert list(text[8:]) == ["md5-0", "md5-0", "md5-1", "md5-1"]


def test_one_rank_alone_matches_its_rows_of_the_whole(dump):
    whole = graphdump.load(dump)
    one = graphdump.load(dump, ranks=1)
    assert list(one.columns[-4:]) == ["Ints", "Mixed", "Late", "Text"]
    part = whole[whole["rank"] == 1]
    for column in ("Ints", "Mixed", "Late", "Text", "kernel", "io", "timestamp", "shape"):
        assert list(one[column]) == list(part[column]), column


def test_columns_are_not_copied_into_blocks(dump):
    frame = graphdump.load(dump)
    # One block per column: pandas kept each array the index filled rather than copying the
    # columns of one dtype together.
    assert frame._mgr.nblocks == len(frame.columns)


def test_loading_one_rank_reads_only_that_rank(tmp_path):
    # Every other rank's statistic.csv is unreadable as one: reading any of them would list it
    # in attrs['skipped'] (as loading rank 1 shows).
    root = tmp_path / "dump"
    for rank in range(40):
        write_rank(root, rank, ["Ints"], lambda k, io: f"{k}")
        if rank > 0:
            (root / f"rank_{rank}" / "Net" / "0" / "0" / "statistic.csv").write_text(
                "Op Type,Op Name\nnot,a\n\x00statistic\n")
    one = graphdump.load(root, ranks=0)
    assert len(one) == 4 and set(one["rank"]) == {0} and one.attrs["skipped"] == []
    other = graphdump.load(root, ranks=1)
    assert [os.path.basename(p) for p, _ in other.attrs["skipped"]] == ["statistic.csv"]
