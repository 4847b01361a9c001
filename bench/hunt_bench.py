#!/usr/bin/env python3
"""graphdump hunt's time to the answer against the plain run's time to the failing step: whole
processes as a user runs them, sides alternating, median of rounds.

The training (bench/lib/hunt_nan_training.py: a masked-mean sequence classifier, AdamW, steps of
20-30 ms with torch 2.13 on the 2-core machine) goes NaN at step 20 (iteration 20: an
all-padding sequence makes 0/0). Per round, back to back:

  1. plain: python hunt_nan_training.py --steps 21: the run up to and including the
            failing step, as the user's run that went NaN got there;
  2. hunt:  graphdump hunt hunt_nan_training.py --steps 40: both passes (pass 1 stops after
            step 20), watch, the explanation and the report, to the printed answer.
Printed, the median over BENCH_ROUNDS rounds of hunt's time over plain's in the same round:
  bench: hunt_vs_plain_to_failing_step ratio=X   (target <= 2.2)
and the plain run's median step time, so the step length can be checked:
  bench: hunt_plain_step_ms value=X

Environment: GRAPHDUMP_BIN (the CLI), BENCH_ROUNDS (default 3), BENCH_DIR (default a temporary
directory).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = os.path.abspath(benchutil.BIN)
ROUNDS = benchutil.rounds()
SCRIPT = os.path.join(benchutil.LIB, "hunt_nan_training.py")
PLANT = 20


def plain(work):
    p, wall = benchutil.run_graphdump("hunt_bench", [sys.executable, SCRIPT, "--steps",
                                                     str(PLANT + 1), "--plant", str(PLANT)], work)
    return wall, benchutil.printed(p)["median_step_s"]


def hunt(work):
    root = os.path.join(work, "hunt")
    shutil.rmtree(root, ignore_errors=True)
    env = dict(os.environ)
    for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG"):
        env.pop(key, None)
    start = time.monotonic()
    p = subprocess.run([BIN, "hunt", "--dump-path", root, SCRIPT, "--steps", str(2 * PLANT),
                        "--plant", str(PLANT)], capture_output=True, text=True, env=env, cwd=work)
    wall = time.monotonic() - start
    with open(os.path.join(root, "answer.json"), encoding="utf-8") as f:
        answer = json.load(f)
    if p.returncode != 1 or answer.get("iteration") != PLANT or answer.get("origin") != "created":
        sys.exit(f"hunt_bench: the hunt did not find step {PLANT}'s NaN ({p.returncode}):\n"
                 f"{p.stdout}\n{p.stderr}")
    return wall, answer["times"]


def main():
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_hunt_bench_")
    os.makedirs(work, exist_ok=True)
    ratios, steps = [], []
    try:
        for r in range(ROUNDS):
            measured = {side: side(work) for side in benchutil.alternate(r, (plain, hunt))}
            (p_wall, step), (h_wall, times) = measured[plain], measured[hunt]
            ratios.append(h_wall / p_wall)
            steps.append(step)
            print(f"round {r}: plain to step {PLANT} {p_wall:.2f} s (step {step * 1000:.1f} ms), "
                  f"hunt {h_wall:.2f} s ({times}), ratio {h_wall / p_wall:.3f}", flush=True)
    finally:
        if not os.environ.get("BENCH_DIR"):
            shutil.rmtree(work, ignore_errors=True)
    print(f"bench: hunt_vs_plain_to_failing_step ratio={statistics.median(ratios):.3f}")
    print(f"bench: hunt_plain_step_ms value={statistics.median(steps) * 1000:.1f}")


if __name__ == "__main__":
    main()
