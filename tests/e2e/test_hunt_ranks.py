#!/usr/bin/python3
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
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gdtest  # noqa: E402
from gdtest import expect, expect_eq  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hunt_training.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_hunt import POOLING_LINE  # noqa: E402


def iterations_of(dump, rank):
    return sorted({int(os.path.basename(d)) for d in
                   glob.glob(os.path.join(dump, f"rank_{rank}", "*", "0", "[0-9]*"))})


def main():
    work = gdtest.temp_dir()
    try:
        root = os.path.join(work, "hunt")
        code, out, err = gdtest.run("hunt", "--nproc", "2", "--dump-path", root, SCRIPT,
                                    "--ddp", "--plant", "2", "--steps", "5")
        expect_eq(code, 1, f"hunt --nproc 2 finds the hit\n{out}\n{err}")
        with open(os.path.join(root, "answer.json"), encoding="utf-8") as f:
            answer = json.load(f)
        expect_eq((answer["rank"], answer["iteration"]), (1, 2), "the rank and iteration")
        expect(answer["kernel"].startswith("Default/div-op"), f"the kernel {answer['kernel']}")
        expect(answer["source_line"].endswith(POOLING_LINE), answer["source_line"])
        expect_eq((answer["verdict"], answer["origin"]), ("persistent", "created"),
                  "persistent, created by rank 1's div")
        expect_eq(answer["creator"]["rank"], 1, "the creating rank")
        expect_eq(answer["creator"]["inputs"][1]["all_zero_rows"], [3], "the divisor's zero row")
        others = answer.get("other_ranks") or []
        expect_eq([o["rank"] for o in others], [0], "rank 0 is listed as another rank")
        if others:
            expect("AllReduce" in (others[0]["through"] or ""), f"rank 0's hit: {others[0]}")
            expect(others[0]["how"].startswith("received through the all-reduce"),
                   f"how rank 0 got it: {others[0]['how']}")
        expect("rank 1" in out and "rank 0: " in out and "received through the all-reduce" in out,
               out)
        for rank in (0, 1):
            expect_eq(iterations_of(os.path.join(root, "pass1"), rank), [0, 1, 2],
                      f"rank {rank} stopped after the hit iteration")
            expect_eq(iterations_of(os.path.join(root, "pass2"), rank), [1, 2],
                      f"rank {rank}'s tensor dump holds the two iterations")
    finally:
        gdtest.cleanup(work)
    gdtest.finish()


if __name__ == "__main__":
    main()
