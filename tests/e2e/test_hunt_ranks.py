"""graphdump hunt --nproc 2 on hunt_training.py --ddp (gloo, DistributedDataParallel): rank 1's
batch of step 2 holds an all-padding row, so rank 1's div makes NaN, which reaches rank 0 only
through the gradient all-reduce (docs/hunt.md):

- exit 1; the answer names rank 1 and its div kernel at the pooling line, created from finite
  inputs, persistent, with the divisor's all-zero row 3;
- rank 0 is named as having received the NaN through the all-reduce (an AllReduce kernel
  whose input, rank 0's gradient, is finite and whose output is not);
- both ranks stopped after iteration 2 (statistic dumps of iterations 0-2 only), and the tensor
  dump of each rank holds iterations 1 and 2.
"""
import glob
import json
import os

import gdtest
from test_hunt import POOLING_LINE

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hunt_training.py")


def iterations_of(dump, rank):
    return sorted({int(os.path.basename(d)) for d in
                   glob.glob(os.path.join(dump, f"rank_{rank}", "*", "0", "[0-9]*"))})


def test_hunt_finds_the_rank_that_made_the_nan(scratch):
    root = os.path.join(scratch, "hunt")
    code, out, err = gdtest.run("hunt", "--nproc", "2", "--dump-path", root, SCRIPT,
                                "--ddp", "--plant", "2", "--steps", "5")
    assert code == 1, f"hunt --nproc 2 finds the hit\n{out}\n{err}"
    with open(os.path.join(root, "answer.json"), encoding="utf-8") as f:
        answer = json.load(f)
    assert (answer["rank"], answer["iteration"]) == (1, 2), "the rank and iteration"
    assert answer["kernel"].startswith("Default/div-op"), f"the kernel {answer['kernel']}"
    assert answer["source_line"].endswith(POOLING_LINE), answer["source_line"]
    assert ((answer["verdict"], answer["origin"]) ==
            ("persistent", "created")), "persistent, created by rank 1's div"
    assert answer["creator"]["rank"] == 1, "the creating rank"
    assert answer["creator"]["inputs"][1]["all_zero_rows"] == [3], "the divisor's zero row"
    others = answer.get("other_ranks") or []
    assert [o["rank"] for o in others] == [0], "rank 0 is listed as another rank"
    if others:
        assert "AllReduce" in (others[0]["through"] or ""), f"rank 0's hit: {others[0]}"
        assert others[0]["how"].startswith("received through the all-reduce"), \
            f"how rank 0 got it: {others[0]['how']}"
    assert "rank 1" in out and "rank 0: " in out and "received through the all-reduce" in out, \
        out
    for rank in (0, 1):
        assert (iterations_of(os.path.join(root, "pass1"), rank) ==
                [0, 1, 2]), f"rank {rank} stopped after the hit iteration"
        assert (iterations_of(os.path.join(root, "pass2"), rank) ==
                [1, 2]), f"rank {rank}'s tensor dump holds the two iterations"
