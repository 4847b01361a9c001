#!/usr/bin/env python3
"""A user's own training script under `graphdump python`, against the same script run by plain
python, whole processes as a user runs them.

The script (bench/lib/user_training.py: a TorchScript CNN, a DataLoader, a custom loss, AdamW,
a scheduler, gradient clipping) prints its step times. Three runs of it per round, back to back:

  1. plain: python user_training.py (the Python running the bench)
  2. off:   graphdump python user_training.py, no configuration: the modules run through
            graphdump's executor and nothing is dumped;
  3. statistic: graphdump python --config (saved_data "statistic", default categories, every
            kernel of every iteration, synchronous).

Each run's step time is the median over steps 3..N (TorchScript profiles its first two calls).
The ratios of runs 2 and 3 to run 1 are taken per round and their median over BENCH_ROUNDS
rounds is printed:
  bench: python_off_vs_plain ratio=X        (target <= 1.03)
  bench: python_statistic_vs_plain ratio=X

Environment: GRAPHDUMP_BIN (the CLI), BENCH_STEPS (default 12), BENCH_BATCH (16), BENCH_SIZE
(64), BENCH_ROUNDS (5), BENCH_DIR (where to write; default a temporary directory).
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = benchutil.BIN
STEPS = benchutil.env_int("BENCH_STEPS", 12, 4)
BATCH = os.environ.get("BENCH_BATCH", "16")
SIZE = os.environ.get("BENCH_SIZE", "64")
ROUNDS = benchutil.rounds(5)
SCRIPT = os.path.join(benchutil.LIB, "user_training.py")


def step_time(command, work):
    """The median step time (steps 3..N) the script reports."""
    return benchutil.median_step("python_bench", command, work)[0]


def main():
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_python_bench_")
    os.makedirs(work, exist_ok=True)
    dump = os.path.join(work, "dump")
    config = benchutil.write_dump_config(os.path.join(work, "statistic.json"), dump,
                                         "statistic", "all")
    args = [SCRIPT, str(STEPS), BATCH, SIZE]
    off_ratios, stat_ratios = [], []
    for r in range(ROUNDS):
        benchutil.remove_tree(dump)
        plain = step_time([sys.executable, *args], work)
        off = step_time([BIN, "python", *args], work)
        stat = step_time([BIN, "python", "--config", config, *args], work)
        off_ratios.append(off / plain)
        stat_ratios.append(stat / plain)
        print(f"round {r + 1}: step plain {plain * 1000:.1f} ms, off {off * 1000:.1f} ms, "
              f"statistic {stat * 1000:.1f} ms", flush=True)
    benchutil.remove_tree(work)
    print(f"bench: python_off_vs_plain ratio={statistics.median(off_ratios):.3f}")
    print(f"bench: python_statistic_vs_plain ratio={statistics.median(stat_ratios):.3f}")


if __name__ == "__main__":
    main()
