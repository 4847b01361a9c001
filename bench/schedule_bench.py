#!/usr/bin/env python3
"""A long training whose lr changes at every step, under `graphdump python` with a statistic dump
of every kernel of every step, against the same script run by plain python: does a step cost
more the longer the training has run?

A dump records each parameter group's hyperparameters by iteration (docs/python.md, "Optimizer
update kernels"): a schedule that changes the lr every step adds a line per group per step.
Recording one must cost the same at step 2,000 as at step 20 (it once re-read every run each
step: 4.8 ms steps at step 10 grew to 94 ms at step 1,480; later each step's change rewrote the
graph files, whose update kernels held every run).

The script (bench/lib/schedule_training.py: an MLP, AdamW, a cosine schedule) prints its step
times. Per round, plain and dumped runs alternate; printed, as medians over BENCH_ROUNDS rounds:
  bench: schedule_late_vs_early ratio=X       (the dumped run's median step over its last 100
                                               steps / over steps 10..110; target ~1: no growth)
  bench: schedule_late_vs_plain ratio=X       (the dumped run's last 100 steps / the plain run's)

Environment: GRAPHDUMP_BIN (the CLI), BENCH_STEPS (default 2000), BENCH_ROUNDS (default 3),
BENCH_DIR (default a temporary directory).
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

STEPS = benchutil.env_int("BENCH_STEPS", 2000, 300)
SCRIPT = os.path.join(benchutil.LIB, "schedule_training.py")
WINDOW = 100


def main():
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="schedule_bench_")
    os.makedirs(work, exist_ok=True)
    growth, overhead = [], []
    for r in range(benchutil.rounds()):
        dump = os.path.join(work, f"dump{r}")
        config = benchutil.write_dump_config(os.path.join(work, f"config{r}.json"), dump,
                                             "statistic", "all")
        times = {}
        for side in benchutil.alternate(r, ["plain", "dumped"]):
            command = [benchutil.BIN, "python", SCRIPT, str(STEPS)]
            if side == "dumped":
                command[2:2] = ["--config", config]
            p, _ = benchutil.run_graphdump("schedule_bench", command, work)
            times[side] = benchutil.printed(p)["steps"]
        early = statistics.median(times["dumped"][10:10 + WINDOW])
        late = statistics.median(times["dumped"][-WINDOW:])
        plain_late = statistics.median(times["plain"][-WINDOW:])
        growth.append(late / early)
        overhead.append(late / plain_late)
        print(f"round {r + 1}: dumped step {early * 1e3:.2f} ms early, {late * 1e3:.2f} ms late; "
              f"plain {plain_late * 1e3:.2f} ms late", flush=True)
        benchutil.remove_tree(dump)
    benchutil.remove_tree(work)
    print(f"bench: schedule_late_vs_early ratio={statistics.median(growth):.3f}")
    print(f"bench: schedule_late_vs_plain ratio={statistics.median(overhead):.3f}")


if __name__ == "__main__":
    main()
