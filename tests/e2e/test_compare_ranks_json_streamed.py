"""`graphdump compare DIR --ranks --json` and `--out` spill each rank's kernels to temporary files
and merge them while they write (docs/scale.md, "Memory and speed at scale"): the JSON and the
CSV must say what comparing each rank alone with the reference says, merged in the order of
graph, iteration, execution order and rank. The dump is made here: 6 ranks of a data-parallel
net (5 kernels, an AllReduce, a parameter; three iterations); ranks 3 and 5 have their AllReduce
output off from iteration 1 on (rank 5 by more), rank 2 its parameter in iteration 2.
Run with the project's Python (.venv/bin/python; pytest, or plain: it runs pytest on itself)."""
import copy
import csv
import json
import os
import sys

import numpy as np
import pytest

import analysis_dumps as d

RANKS = 6
ALLREDUCE = "Default/allreduce-DataParallel/w/AllReduce-op9"


@pytest.fixture(scope="module")
def dump(module_scratch):
    root = os.path.join(module_scratch, "dump")
    net = d.simple_net(n=5)
    net.append({"full_name": ALLREDUCE,
                "outputs": [np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)]})
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    for r in range(RANKS):
        its = {it: copy.deepcopy(net) for it in range(3)}
        weights = {it: {"fc_weight": w.copy()} for it in range(3)}
        for it in (1, 2):
            if r in (3, 5):
                its[it][5]["outputs"][0][0, 0] += 1e-3 * (r - 2)
        if r == 2:
            weights[2]["fc_weight"][2, 2] += 1e-3
        d.write_dump(root, its, rank=r, parameters=weights, clock=1700000000000000 + 1000 * r)
    return root


def merge_key(k):
    return (k["graph_id"], k["iteration"] < 0, k["iteration"], k["order"], k["rank"])


def compare(*args):
    p = d.graphdump("compare", *args, "-q")
    assert p.returncode in (0, 1), p.stderr
    return p


def test_json_is_each_ranks_comparison_merged(dump):
    whole = json.loads(compare(dump, "--ranks", "--json").stdout)
    alone = {r: json.loads(compare(dump, f"--ranks=0,{r}", "--json").stdout)
             for r in range(1, RANKS)}
    for r in range(1, RANKS):
        assert [k for k in whole["kernels"] if k["rank"] == r] == alone[r]["kernels"], r
        assert [u for u in whole["unpaired"] if u["rank"] == r] == alone[r]["unpaired"]
    expected = sorted((k for r in range(1, RANKS) for k in alone[r]["kernels"]), key=merge_key)
    assert whole["kernels"] == expected
    summary = whole["summary"]
    assert summary["kernels"] == len(expected)
    assert summary["error"] == sum(a["summary"]["error"] for a in alone.values()) > 0
    assert whole["compared_ranks"] == [1, 2, 3, 4, 5]

    # The first failure: the first error in the merged order, rank 3's AllReduce in iteration 1
    # (before rank 5's at the same kernel), with rank 3's own comparison's origin and chain.
    errors = [k for k in expected if k["verdict"] == "error"]
    first = whole["first_failure"]
    assert (first["kernel"], first["rank"], first["iteration"]) == \
        (errors[0]["kernel_a"], errors[0]["rank"], errors[0]["iteration"])
    assert (first["kernel"], first["rank"], first["iteration"]) == (ALLREDUCE, 3, 1)
    assert first == alone[3]["first_failure"]
    assert whole["first_disagreement"]["rank"] == 3
    assert whole["first_disagreement"] == alone[3]["first_disagreement"]
    # A kernel that adds error is its own origin, whichever kernels of other ranks sort before.
    for k in whole["kernels"]:
        if k["adds_error"]:
            assert k["error_origin"] == k["kernel_a"], k


def test_out_is_each_ranks_rows_merged(dump, scratch):
    out = os.path.join(scratch, "all.csv")
    text = compare(dump, "--ranks", "--out", out)
    with open(out) as f:
        whole = list(csv.DictReader(f))
    rows = []
    for r in range(1, RANKS):
        one = os.path.join(scratch, f"rank{r}.csv")
        compare(dump, f"--ranks=0,{r}", "--out", one)
        with open(one) as f:
            mine = list(csv.DictReader(f))
        assert [row for row in whole if row["rank"] == str(r)] == mine
        rows += mine
    key = lambda row: (int(row["graph_id"]), int(row["iteration"]) < 0, int(row["iteration"]),
                       int(row["order"]), int(row["rank"]))
    assert whole == sorted(rows, key=key)
    # The text beside --out is the text without it.
    assert text.stdout == compare(dump, "--ranks").stdout
    assert "first disagreement: iteration 1, " + ALLREDUCE in text.stdout
    # --json and --out together: the same CSV.
    both = os.path.join(scratch, "both.csv")
    compare(dump, "--ranks", "--json", "--out", both)
    with open(both) as f, open(out) as g:
        assert f.read() == g.read()


def test_no_temporary_file_is_left(dump, scratch):
    import subprocess
    tmp = os.path.join(scratch, "tmp")
    os.makedirs(tmp)
    binary = os.environ.get("GRAPHDUMP_BIN", "graphdump")
    p = subprocess.run([binary, "compare", dump, "--ranks", "--json", "-q", "--out",
                        os.path.join(scratch, "x.csv")], capture_output=True, text=True,
                       env=dict(os.environ, TMPDIR=tmp))
    assert p.returncode == 1 and json.loads(p.stdout)["kernels"], p.stderr
    assert os.listdir(tmp) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
