"""`graphdump compare DIR --ranks` without --json or --out keeps only what its text shows of each
rank (docs/scale.md, "Memory and speed at scale"): the counts, the first 20 kernels that do
not pass, the first 20 unpaired kernels and the first disagreement must still be those of the
whole result, which --json gives. The dump is made here, statistics only: 7 ranks of 30
AllReduce kernels in two iterations; ranks 3 and 5 disagree from kernel 4 of iteration 1 on (52
errors, interleaved by kernel), and rank 6 lacks kernels 5 to 29 (50 unpaired).
Run with the project's Python (.venv/bin/python; pytest, or plain: it runs pytest on itself)."""
import json
import os
import sys

import pytest

import analysis_dumps as d

HEADER = ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
          "Max Value,Min Value,Avg Value,L2Norm Value,NaN Count,Negative Inf Count,"
          "Positive Inf Count\n")
NAMES = [f"Default/net-Net/block{i}-Block/AllReduce-op{i}" for i in range(30)]


def max_value(rank, iteration, kernel):
    if rank in (3, 5) and iteration == 1 and kernel >= 4:
        return 1.5 + 0.01 * (rank + kernel)
    return 1.5


@pytest.fixture(scope="module")
def dump(module_scratch):
    root = os.path.join(module_scratch, "ranks")
    for rank in range(7):
        rank_dir = os.path.join(root, f"rank_{rank}")
        os.makedirs(os.path.join(rank_dir, "execution_order"))
        with open(os.path.join(rank_dir, "execution_order",
                               "ms_execution_order_graph_0.csv"), "w") as f:
            f.write("NodeExecutionOrder-FullNameWithScope\n" + "".join(n + "\n" for n in NAMES))
        for iteration in (0, 1):
            it_dir = os.path.join(rank_dir, "Net", "0", str(iteration))
            os.makedirs(it_dir)
            lines = [HEADER]
            for i, name in enumerate(NAMES):
                if rank == 6 and i >= 5:
                    continue
                lines.append(f'AllReduce,{name.replace("/", "_")},0,0,{1000 + i},output,0,1024,'
                             f'float32,"(16,16)",{max_value(rank, iteration, i)},-1.5,0.01,12.5,'
                             '0,0,0\n')
            with open(os.path.join(it_dir, "statistic.csv"), "w") as f:
                f.write("".join(lines))
    return root


def test_text_shows_what_the_whole_result_says(dump):
    whole = d.graphdump("compare", dump, "--ranks", "-q", "--json")
    assert whole.returncode == 1, whole.stderr
    j = json.loads(whole.stdout)
    text = d.graphdump("compare", dump, "--ranks", "-q")
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()

    summary = j["summary"]
    assert (summary["kernels"], summary["pass"], summary["warning"], summary["error"]) == (
        310, 258, 0, 52)
    assert len(j["unpaired"]) == 50
    assert lines[1] == ("synced kernels (parameters, AllReduce, optimizer outputs): 310 compared "
                        "(258 pass, 0 warning, 52 error), 50 unpaired")

    # The first 20 that do not pass, in the whole result's order (kernel, then rank).
    not_passed = [k for k in j["kernels"] if k["verdict"] != "pass"]
    expected = [f"  error   it {k['iteration']} rank {k['rank']} vs 0 {k['kernel_a']}: {k['reason']}"
                for k in not_passed[:20]]
    assert lines[2:22] == expected
    assert [k["rank"] for k in not_passed[:4]] == [3, 5, 3, 5]
    assert lines[22] == "  ... (see --out for every tensor)"

    unpaired = [f"  unpaired: only in rank 0: iteration {u['iteration']} {u['kernel']}"
                for u in j["unpaired"][:20]]
    assert lines[23:43] == unpaired
    assert lines[43] == ("first disagreement: iteration 1, " + NAMES[4] + " (graph 0), rank 3 vs "
                         "rank 0, Max Value 1.57 vs 1.5 (by 0.07; output 0, statistics only)")
    assert j["first_disagreement"]["rank"] == 3
    assert j["first_disagreement"]["kernel"] == NAMES[4]


def test_out_still_lists_every_tensor(dump, scratch):
    out = os.path.join(scratch, "ranks.csv")
    p = d.graphdump("compare", dump, "--ranks", "-q", "--out", out)
    assert p.returncode == 1, p.stderr
    with open(out) as f:
        rows = f.read().splitlines()
    assert len(rows) == 1 + 310  # a header and one output tensor per compared kernel
    assert "synced kernels (parameters, AllReduce, optimizer outputs): 310 compared" in p.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
