#!/usr/bin/env python3
"""Step time of 2-rank data-parallel training with a statistic dump of every kernel, against the
same training without dump.

Runs `graphdump train MODEL --nproc 2` in pairs, back to back (no config; then saved_data
"statistic", all kernels, all iterations, into a directory of its own), BENCH_ROUNDS pairs,
reads rank 0's per-step times from its output ("[rank 0] step k/N: ... (T s)") and compares the
median of steps 2..N (step 1 also compiles and registers the graph). Prints
`bench: distributed_stat_dump ratio=X`, the median over the pairs of dumped / undumped (lower is
better): two ranks on a 2-core machine move by a factor of two from run to run, which a pair
run within seconds mostly shares.

Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_SOURCE_DIR; BENCH_MODEL (default
demo_alexnet), BENCH_SHAPE (default 8x3x64x64, the combined batch), BENCH_STEPS (default 5),
BENCH_NPROC (default 2), BENCH_ROUNDS (default 5).
"""
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = os.environ.get("GRAPHDUMP_BIN", "build/tools/graphdump")
MODEL = os.environ.get("BENCH_MODEL", "demo_alexnet")
SHAPE = os.environ.get("BENCH_SHAPE", "8x3x64x64")
STEPS = int(os.environ.get("BENCH_STEPS", "5"))
NPROC = int(os.environ.get("BENCH_NPROC", "2"))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "5")))
STEP_LINE = re.compile(r"^\[rank 0\] step (\d+)/\d+:.*\(([0-9.]+) s\)")


def train(model, config, work):
    args = [BIN, "train", model, "--steps", str(STEPS), "--input-shape", SHAPE, "--classes", "10",
            "--nproc", str(NPROC)]
    if config:
        args += ["--config", config]
    p, wall = benchutil.run_graphdump("distributed_bench", args, work)
    steps = [float(m.group(2)) for line in p.stdout.splitlines()
             if (m := STEP_LINE.match(line)) and int(m.group(1)) >= 2]
    return (statistics.median(steps) if steps else wall / STEPS), wall


def main():
    work = tempfile.mkdtemp(prefix="graphdump_dist_bench_")
    try:
        model = benchutil.make_model(work, MODEL)
        train(model, None, work)  # warm the page cache
        ratios = []
        for r in range(ROUNDS):
            # A directory of its own for each run: a dump path holds one run (docs/layout.md).
            config = benchutil.write_dump_config(os.path.join(work, f"stat{r}.json"),
                                                 os.path.join(work, f"dump{r}"), "statistic",
                                                 "all", devices=range(NPROC))
            base, base_wall = train(model, None, work)
            dumped, dumped_wall = train(model, config, work)
            ratios.append(dumped / base)
            print(f"distributed_bench: round {r + 1}: {MODEL} batch {SHAPE} over {NPROC} ranks, "
                  f"{STEPS} steps: step {base * 1000:.1f} ms without dump, "
                  f"{dumped * 1000:.1f} ms with statistic dump (wall {base_wall:.1f} s / "
                  f"{dumped_wall:.1f} s)", flush=True)
        print(f"bench: distributed_stat_dump ratio={statistics.median(ratios):.3f}")
    finally:
        benchutil.remove_tree(work)


if __name__ == "__main__":
    main()
