"""`graphdump watch DIR --json` over several ranks spills each rank's hits to a temporary file and
merges them by occurrence while it prints (docs/scale.md, "Memory and speed at scale"): the
JSON must say what watching each rank alone says, ordered across ranks. The dump is made here,
statistics only: 9 ranks (rank_0 to rank_7 and rank_12) of 40 kernels in three iterations, each
rank's clock different; rank 5 makes a NaN at kernel 10 of iteration 0 that an AllReduce at
kernel 11 spreads to every rank (all later kernels NaN), rank 2 alone also has an infinity at
kernel 3 of iteration 0, rank 7 hits nothing, and rank_6's last statistic.csv is unreadable.
Run with the project's Python (.venv/bin/python; pytest, or plain: it runs pytest on itself)."""
import json
import os
import sys

import pytest

import analysis_dumps as d

HEADER = ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
          "Max Value,Min Value,Avg Value,L2Norm Value,NaN Count,Negative Inf Count,"
          "Positive Inf Count\n")
RANKS = [0, 1, 2, 3, 4, 5, 6, 7, 12]
KERNELS = 40


def name(i):
    op = "AllReduce" if i == 11 else "Mul"
    return f"Default/net-Net/block{i}-Block/{op}-op{i}"


def values(rank, iteration, kernel):
    """(max, nan count, +inf count) of the kernel's output."""
    if rank == 7:
        return "1.5", 0, 0
    if rank == 2 and iteration == 0 and kernel == 3:
        return "inf", 0, 4
    if (rank == 5 and kernel >= 10) or kernel >= 11:
        return "nan", 3, 0
    return "1.5", 0, 0


@pytest.fixture(scope="module")
def dump(module_scratch):
    root = os.path.join(module_scratch, "ranks")
    for rank in RANKS:
        rank_dir = os.path.join(root, f"rank_{rank}")
        os.makedirs(os.path.join(rank_dir, "execution_order"))
        with open(os.path.join(rank_dir, "execution_order",
                               "ms_execution_order_graph_0.csv"), "w") as f:
            f.write("NodeExecutionOrder-FullNameWithScope\n" +
                    "".join(name(i) + "\n" for i in range(KERNELS)))
        clock = 1000000 * (len(RANKS) - rank)  # later ranks' clocks are earlier
        for iteration in (0, 1, 2):
            it_dir = os.path.join(rank_dir, "Net", "0", str(iteration))
            os.makedirs(it_dir)
            lines = [HEADER]
            for i in range(KERNELS):
                mx, nans, infs = values(rank, iteration, i)
                op = name(i).rsplit("/", 1)[-1].split("-op")[0]
                stamp = clock + 1000 * iteration + i
                lines.append(f'{op},{name(i).replace("/", "_")},0,0,{stamp},output,0,1024,'
                             f'float32,"(16,16)",{mx},-1.5,0.01,12.5,{nans},0,{infs}\n')
            text = "".join(lines)
            if rank == 6 and iteration == 2:
                text = "not a statistic file\n"
            with open(os.path.join(it_dir, "statistic.csv"), "w") as f:
                f.write(text)
    return root


def occurrence(h):
    """The order hits occurred in across ranks (docs/analysis.md)."""
    return (h["iteration"] < 0, h["iteration"], h["sequence"], h["io"] != "input", h["rank"],
            h["graph_id"], h["slot"])


def watch_json(*args):
    p = d.graphdump("watch", *args, "--json", "-q")
    assert p.returncode in (0, 1), p.stderr
    return p, json.loads(p.stdout)


@pytest.mark.parametrize("checks", ["nan,inf", "nan", "inf,overflow", "large:1"])
def test_hits_are_each_ranks_merged_by_occurrence(dump, checks):
    p, whole = watch_json(dump, "--check", checks, "-j", "2")
    alone = {}
    for rank in RANKS:
        _, one = watch_json(os.path.join(dump, f"rank_{rank}"), "--check", checks)
        alone[rank] = one
    # Every hit of every rank, none other, each as watching its rank alone says.
    for rank in RANKS:
        assert [h for h in whole["hits"] if h["rank"] == rank] == alone[rank]["hits"], rank
    expected = sorted((h for rank in RANKS for h in alone[rank]["hits"]), key=occurrence)
    assert whole["hits"] == expected
    assert whole["tensors_checked"] == sum(a["tensors_checked"] for a in alone.values())
    assert p.returncode == (1 if expected else 0)

    firsts = [alone[rank]["hits"][0] for rank in RANKS if alone[rank]["hits"]]
    firsts.sort(key=occurrence)
    assert whole["first_hit_per_rank"] == firsts
    assert whole["first_hit"] == (firsts[0] if firsts else None)
    assert whole["first_rank"] == (firsts[0]["rank"] if firsts else None)
    assert [s["path"] for s in whole["skipped"]] == \
        [s["path"] for rank in RANKS for s in alone[rank]["skipped"]]


def test_first_hit_is_the_rank_that_made_the_nan(dump):
    _, whole = watch_json(dump, "--check", "nan")
    assert whole["first_rank"] == 5
    assert whole["first_hit"]["kernel"] == name(10) and whole["first_hit"]["iteration"] == 0
    # Then every rank that hits, at the AllReduce; rank 7 never does.
    assert [h["rank"] for h in whole["first_hit_per_rank"]] == [5, 0, 1, 2, 3, 4, 6, 12]
    assert {h["kernel"] for h in whole["first_hit_per_rank"][1:]} == {name(11)}
    # Iteration 2 of rank_6 is skipped: 29 NaN outputs a rank in iterations 0 to 2, rank 5 one
    # more in each, rank 6 none in iteration 2.
    assert len(whole["hits"]) == 8 * 29 * 3 + 3 - 29
    assert any("rank_6" in s["path"] for s in whole["skipped"])


def test_inf_before_the_nan_comes_first(dump):
    _, whole = watch_json(dump)
    assert whole["first_hit"]["rank"] == 2 and whole["first_hit"]["kernel"] == name(3)
    assert whole["first_hit"]["check"] == "inf"
    assert [h["rank"] for h in whole["first_hit_per_rank"]][:2] == [2, 5]


def test_package_watch_lists_the_same_hits(dump):
    """graphdump.watch (the Python package) returns the CLI's hits, in the same order."""
    import subprocess
    package = os.path.join(os.environ.get("GRAPHDUMP_BUILD_DIR", ""), "python")
    if not os.path.isdir(os.path.join(package, "graphdump")):
        pytest.skip("the Python package is not built")
    script = ("import json, sys, graphdump\n"
              "f = graphdump.watch(sys.argv[1], 'nan,inf')\n"
              "print(json.dumps([[int(r), k, int(i)] for r, k, i in "
              "zip(f['rank'], f['kernel'], f['iteration'])]))\n"
              "print(len(f.attrs['skipped']))\n")
    p = subprocess.run([sys.executable, "-c", script, dump], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=package))
    assert p.returncode == 0, p.stderr
    rows, skipped = p.stdout.splitlines()
    _, whole = watch_json(dump)
    assert json.loads(rows) == [[h["rank"], h["kernel"], h["iteration"]] for h in whole["hits"]]
    assert int(skipped) == len(whole["skipped"]) == 1


def test_no_temporary_file_is_left(dump, scratch):
    tmp = os.path.join(scratch, "tmp")
    os.makedirs(tmp)
    import subprocess
    binary = os.environ.get("GRAPHDUMP_BIN", "graphdump")
    p = subprocess.run([binary, "watch", dump, "--json", "-q"], capture_output=True, text=True,
                       env=dict(os.environ, TMPDIR=tmp))
    assert p.returncode == 1 and json.loads(p.stdout)["hits"], p.stderr
    assert os.listdir(tmp) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
