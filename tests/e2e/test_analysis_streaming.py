"""ls, trace, report and a two-run compare read a many-rank dump one rank at a time (docs/scale.md,
"Memory and speed at scale"): what each says of a rank of the dump must be what it says of that
rank's directory alone, whatever order the ranks are indexed in. The dump is made here: 7 ranks
(more than the cores, so ranks are indexed in parallel and finish out of order), statistics only,
each rank's values its own, a source trace per kernel, and in B one rank whose kernel differs.
Run with the project's Python (.venv/bin/python; pytest, or plain: it runs pytest on itself)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

BIN = os.environ.get("GRAPHDUMP_BIN", "graphdump")
RANKS = 7
KERNELS = 24
ITERATIONS = 2
NAN_RANK = 4          # rank whose kernel NAN_KERNEL outputs a NaN at iteration 1
NAN_KERNEL = 9
DIFF_RANK = 5         # rank of B whose kernel DIFF_KERNEL's output max differs from A's
DIFF_KERNEL = 13
HEADER = ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
          "Max Value,Min Value,Avg Value,L2Norm Value,NaN Count,Negative Inf Count,"
          "Positive Inf Count\n")


def kernel_name(i):
    kind = ("MatMul", "Add", "Mul", "AllReduce")[i % 4]
    return f"Default/net-Net/block{i // 4}-Block/{kind}-op{i}"


def statistic_csv(rank, iteration, reference):
    lines = [HEADER]
    for i in range(KERNELS):
        name = kernel_name(i)
        op_type = name.rsplit("/", 1)[1].split("-op")[0]
        for io in ("input", "output"):
            top = 1.0 + rank + i / 100 + iteration / 10
            if reference and rank == DIFF_RANK and i == DIFF_KERNEL and io == "output":
                top *= 1.5
            stats = f"{top},{-top},0.01,{2 * top},0,0,0"
            if (not reference and rank == NAN_RANK and iteration == 1 and i >= NAN_KERNEL and
                    (i > NAN_KERNEL or io == "output")):
                stats = "nan,nan,nan,nan,3,0,0"
            stamp = 1700000000000000 + 1000 * iteration + 2 * i + (io == "output")
            lines.append(f'{op_type},{name.replace("/", "_")},0,0,{stamp},{io},0,1024,float32,'
                         f'"(16,16)",{stats}\n')
    return "".join(lines)


def write_dump(root, reference):
    for rank in range(RANKS):
        rank_dir = os.path.join(root, f"rank_{rank}")
        os.makedirs(os.path.join(rank_dir, "execution_order"))
        with open(os.path.join(rank_dir, "execution_order", "ms_execution_order_graph_0.csv"),
                  "w") as f:
            f.write("NodeExecutionOrder-FullNameWithScope\n" +
                    "".join(kernel_name(i) + "\n" for i in range(KERNELS)))
        os.makedirs(os.path.join(rank_dir, "graphs"))
        with open(os.path.join(rank_dir, "graphs", "ms_output_trace_code_graph_0.ir"), "w") as f:
            for i in range(KERNELS):
                f.write(f"%{i}(x) = Op(%{i - 1})\n    # Fullname with scope: ({kernel_name(i)})\n"
                        f"    # In file model.py({10 + i % 6})/    x = layer{i}(x)/\n")
        for iteration in range(ITERATIONS):
            it_dir = os.path.join(rank_dir, "Net", "0", str(iteration))
            os.makedirs(it_dir)
            with open(os.path.join(it_dir, "statistic.csv"), "w") as f:
                f.write(statistic_csv(rank, iteration, reference))


@pytest.fixture(scope="module")
def dumps():
    tmp = tempfile.mkdtemp(prefix="graphdump_streaming_")
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    write_dump(a, reference=False)
    write_dump(b, reference=True)
    yield tmp, a, b
    shutil.rmtree(tmp, ignore_errors=True)


def graphdump(*args, expect_rc):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == expect_rc, (args, p.returncode, p.stdout, p.stderr)
    return p.stdout


def test_ls_ranks_are_their_directories(dumps):
    _, a, _ = dumps
    whole = json.loads(graphdump("ls", a, "--json", "--kernels", expect_rc=0))
    assert [r["rank"] for r in whole["ranks"]] == list(range(RANKS))
    for rank in range(RANKS):
        alone = json.loads(graphdump("ls", os.path.join(a, f"rank_{rank}"), "--json", "--kernels",
                                     expect_rc=0))
        assert whole["ranks"][rank] == alone["ranks"][0]
    total = whole["total"]
    assert total["ranks"] == RANKS
    assert total["statistic_rows"] == RANKS * ITERATIONS * KERNELS * 2
    assert total["kernels"] == RANKS * ITERATIONS * KERNELS
    # The text lists the ranks in order, each as its directory alone lists it.
    text = graphdump("ls", a, expect_rc=0).splitlines()
    body = text[1:-1]
    expected = []
    for rank in range(RANKS):
        expected += graphdump("ls", os.path.join(a, f"rank_{rank}"), expect_rc=0).splitlines()[1:-1]
    assert body == expected
    assert text[-1].startswith(f"total: {RANKS} rank(s), {RANKS} graph(s), "
                               f"{RANKS * ITERATIONS} iteration(s), "
                               f"{RANKS * ITERATIONS * KERNELS} kernel calls")


def test_trace_matches_every_rank(dumps):
    _, a, _ = dumps
    for args in ([], ["--iteration", "1"]):
        whole = json.loads(graphdump("trace", a, "model.py:13", "--json", *args, expect_rc=0))
        expected = []
        for rank in range(RANKS):
            expected += json.loads(graphdump("trace", os.path.join(a, f"rank_{rank}"),
                                             "model.py:13", "--json", *args, expect_rc=0))
        assert whole == expected
        # Kernels 3, 9, 15 and 21 are traced to line 13, on every rank.
        assert [(m["rank"], m["kernel"]) for m in whole] == [
            (rank, kernel_name(i)) for rank in range(RANKS) for i in (3, 9, 15, 21)]
        assert all(len(m["files"]) == 2 * (1 if args else ITERATIONS) for m in whole)
    out = graphdump("trace", a, "model.py:99", expect_rc=1)
    assert f"({RANKS * KERNELS} kernels have source traces" in out


def comparison(stdout):
    """A compare --json result without what names the dump directories."""
    j = json.loads(stdout)
    for k in j["kernels"]:
        for t in k["tensors"]:
            t.pop("path_a", None)
            t.pop("path_b", None)
    return j


def test_compare_pairs_rank_by_rank(dumps):
    _, a, b = dumps
    whole = comparison(graphdump("compare", a, b, "--json", "-q", expect_rc=1))
    assert len(whole["kernels"]) == RANKS * ITERATIONS * KERNELS
    kernels = []
    for rank in range(RANKS):
        alone = comparison(graphdump("compare", os.path.join(a, f"rank_{rank}"),
                                     os.path.join(b, f"rank_{rank}"), "--json", "-q",
                                     expect_rc=1 if rank in (NAN_RANK, DIFF_RANK) else 0))
        kernels += alone["kernels"]
    assert whole["kernels"] == kernels
    errors = {(k["rank"], k["iteration"], k["kernel_a"]) for k in whole["kernels"]
              if k["verdict"] == "error"}
    assert {(DIFF_RANK, it, kernel_name(DIFF_KERNEL)) for it in range(ITERATIONS)} <= errors
    assert {rank for rank, _, _ in errors} == {NAN_RANK, DIFF_RANK}
    # The first divergence is the lowest rank's: rank NAN_RANK's NaN at iteration 1.
    text = graphdump("compare", a, b, "-q", expect_rc=1)
    assert re.search(rf"first divergence: {re.escape(kernel_name(NAN_KERNEL))} \(rank "
                     rf"{NAN_RANK}, graph 0, iteration 1\)", text), text
    # One rank of B against every rank of A: its only rank is each one's partner.
    single = comparison(graphdump("compare", a, os.path.join(b, "rank_0"), "--json", "-q",
                                  expect_rc=1))
    assert len(single["kernels"]) == RANKS * ITERATIONS * KERNELS
    assert {k["rank"] for k in single["kernels"]} == set(range(RANKS))


def report_data(path):
    with open(path) as f:
        page = f.read()
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                     re.S)
    return page, json.loads(data.group(1))


def test_report_shows_the_rank_that_hit(dumps):
    tmp, a, b = dumps
    whole, alone = os.path.join(tmp, "whole.html"), os.path.join(tmp, "alone.html")
    graphdump("report", a, "-o", whole, expect_rc=0)
    graphdump("report", os.path.join(a, f"rank_{NAN_RANK}"), "-o", alone, expect_rc=0)
    page, data = report_data(whole)
    page_alone, data_alone = report_data(alone)
    assert data["charts"] == data_alone["charts"]
    assert len(re.findall(r'<option value="\d+"', page)) == RANKS
    assert f"rank {NAN_RANK}" in page and kernel_name(NAN_KERNEL) in page
    # --compare: the comparison charts of a rank are those of its directories alone (their
    # markers name the rank on the page of many ranks).
    graphdump("report", "--compare", a, b, "-o", whole, "--rank", str(DIFF_RANK), expect_rc=0)
    graphdump("report", "--compare", os.path.join(a, f"rank_{DIFF_RANK}"),
              os.path.join(b, f"rank_{DIFF_RANK}"), "-o", alone, expect_rc=0)

    def compare_charts(data):
        charts = [dict(c) for c in data["charts"] if c["id"].startswith("compare-")]
        for c in charts:
            c["markers"] = [m["index"] for m in c["markers"]]
        return charts

    charts = compare_charts(report_data(whole)[1])
    assert [c["id"] for c in charts] == ["compare-cosine", "compare-errors", "compare-attribution"]
    assert charts == compare_charts(report_data(alone)[1])
    assert charts[0]["markers"][0] == DIFF_KERNEL


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
