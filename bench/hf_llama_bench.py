#!/usr/bin/env python3
"""A HuggingFace transformers training under `graphdump python`, against the same script run by
the plain Python: whole processes as a user runs them, sides alternating, median of rounds.

The script is the package tests' tests/package/hf_llama_train.py (a tiny LlamaForCausalLM built
from its config with random weights, SDPA attention, AdamW, clipping, a plain loop; no
download), run with the Python running this bench (the project's environment: run it with
.venv/bin/python). It prints its step times; each run's step time is the median over steps
3..N. Per round, back to back:

  1. plain:     python hf_llama_train.py
  2. statistic: graphdump python with a statistic dump (default categories) of every forward,
                backward and optimizer kernel of every step, synchronous.
Printed, as medians over BENCH_ROUNDS rounds:
  bench: hf_llama_statistics ratio=X     (median step time, statistic / plain)
  bench: hf_llama_statistics_process ratio=X
                                         (the whole process's wall time, statistic / plain:
                                          Python, torch and transformers start-up included)
and per round the step times, the process times and the statistic rows one step wrote.

Environment: GRAPHDUMP_BIN (the CLI), BENCH_STEPS (default 12), BENCH_ROUNDS (3), BENCH_MODEL
("BATCH SEQ", default "4 64"), BENCH_DIR (default a temporary directory).
"""
import glob
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = benchutil.BIN
STEPS = benchutil.env_int("BENCH_STEPS", 12, 5)
ROUNDS = benchutil.rounds()
BATCH, SEQ = os.environ.get("BENCH_MODEL", "4 64").split()
SCRIPT = os.path.join(benchutil.SOURCE, "tests", "package", "hf_llama_train.py")


def run(command, work):
    """(the script's median step time over steps 3..N, the process's wall seconds)."""
    return benchutil.median_step("hf_llama_bench", command, work)


def rows_of_one_step(dump):
    """statistic.csv rows of iteration 1 (every graph)."""
    count = 0
    for path in glob.glob(os.path.join(dump, "rank_0", "*", "*", "1", "statistic.csv")):
        with open(path) as f:
            count += sum(1 for _ in f) - 1
    return count


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is built from its config
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_hf_llama_bench_")
    os.makedirs(work, exist_ok=True)
    args = [SCRIPT, os.path.join(work, "params.npz"), "--steps", str(STEPS), "--batch", BATCH,
            "--seq", SEQ]
    step_r, process_r = [], []
    for r in range(ROUNDS):
        config = benchutil.write_dump_config(os.path.join(work, f"config{r}.json"),
                                             os.path.join(work, f"dump{r}"), "statistic", "all")
        sides = [("plain", [sys.executable, *args]),
                 ("statistic", [BIN, "python", "--config", config, *args])]
        measured = {name: run(command, work) for name, command in benchutil.alternate(r, sides)}
        (plain, plain_wall), (stat, stat_wall) = measured["plain"], measured["statistic"]
        step_r.append(stat / plain)
        process_r.append(stat_wall / plain_wall)
        print(f"round {r + 1}: step plain {plain * 1e3:.1f} ms, statistic {stat * 1e3:.1f} ms "
              f"({rows_of_one_step(os.path.join(work, f'dump{r}'))} statistic rows a step); "
              f"process plain {plain_wall:.2f} s, statistic {stat_wall:.2f} s", flush=True)
    benchutil.remove_tree(work)
    print(f"bench: hf_llama_statistics ratio={statistics.median(step_r):.3f}")
    print(f"bench: hf_llama_statistics_process ratio={statistics.median(process_r):.3f}")


if __name__ == "__main__":
    main()
