#!/usr/bin/env python3
"""Training with every kernel dumped, against plain training and against `dd`.

Trains the demo AlexNet (examples/make_models.py) with `graphdump train` three ways, side by
side in one run of this script, all asynchronous dump (dump_mode 0, e2e_dump_settings.enable false):

  1. no dump;
  2. saved_data "tensor", every kernel, iterations 1..STEPS-1 (step 0 also runs the shape pass
     and compiles, so it is left out of the measurement by not dumping it);
  3. saved_data "statistic" (default categories), every kernel, iterations 1..STEPS-1.

Dump throughput: the bytes run 2 wrote divided by the time the dump added to the run (wall time
of run 2 minus wall time of run 1: it includes the queue drain at exit). `dd` then writes the
same number of bytes to a file in the same directory with the same sync policy (graphdump does
not fsync by default; neither does dd here) and the ratio of the two rates is printed as
`bench: train_dump_vs_dd ratio=X` (target >= 0.7).

Step time: the median per-step time the CLI prints ("step k/N: ... (T s)") over steps 2..N of
run 3 against run 1. Runs 1 and 3 are repeated in pairs, BENCH_ROUNDS times (no dump, then
statistic, back to back), and the median of the pairs' ratios is printed as
`bench: train_statistic_vs_nodump ratio=X` (target <= 1.15): the machine's speed drifts by
20% over minutes, which a pair run within seconds of each other mostly shares.

Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_SOURCE_DIR; BENCH_MODEL (default
demo_alexnet), BENCH_SHAPE (default 8x3x64x64), BENCH_STEPS (default 5), BENCH_ROUNDS (default
5), BENCH_DIR (where to write; default a temporary directory).
"""
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = os.environ.get("GRAPHDUMP_BIN", "build/tools/graphdump")
MODEL = os.environ.get("BENCH_MODEL", "demo_alexnet")
SHAPE = os.environ.get("BENCH_SHAPE", "8x3x64x64")
STEPS = max(3, int(os.environ.get("BENCH_STEPS", "5")))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "5")))
STEP_LINE = re.compile(r"^step (\d+)/\d+:.*\(([0-9.]+) s\)")


def train(model, config, work):
    """Runs graphdump train; returns (median step time of steps 2..N, wall seconds)."""
    args = [BIN, "train", model, "--steps", str(STEPS), "--input-shape", SHAPE, "--classes", "10"]
    if config:
        args += ["--config", config]
    p, wall = benchutil.run_graphdump("train_dump_bench", args, work)
    steps = [float(m.group(2)) for line in p.stdout.splitlines()
             if (m := STEP_LINE.match(line)) and int(m.group(1)) >= 2]
    return statistics.median(steps), wall


def write_config(work, name, saved_data):
    return benchutil.write_dump_config(os.path.join(work, name + ".json"),
                                       os.path.join(work, name), saved_data, f"1-{STEPS - 1}",
                                       asynchronous=True)


def dd_seconds(directory, size):
    """Seconds `dd` takes to write `size` bytes (1 MiB blocks) to a new file in `directory`."""
    out = os.path.join(directory, "dd.bin")
    start = time.monotonic()
    benchutil.dd_write(out, size, 1 << 20)
    seconds = time.monotonic() - start
    os.remove(out)
    return seconds


def main():
    work = tempfile.mkdtemp(prefix="graphdump_train_dump_bench_", dir=os.environ.get("BENCH_DIR"))
    try:
        model = benchutil.make_model(work, MODEL)
        tensor_cfg = write_config(work, "tensor", "tensor")
        train(model, None, work)  # warm the page cache
        pairs = []  # (no-dump step, statistic step), back to back
        for r in range(ROUNDS):
            # A directory of its own for each run: a dump path holds one run (docs/layout.md).
            stat_cfg = write_config(work, f"statistic{r}", "statistic")
            pairs.append((train(model, None, work)[0], train(model, stat_cfg, work)[0]))
        base_step, base_wall = train(model, None, work)
        tensor_step, tensor_wall = train(model, tensor_cfg, work)

        dumped = benchutil.npy_bytes(os.path.join(work, "tensor"))
        extra = max(tensor_wall - base_wall, 1e-3)
        dump_rate = dumped / extra
        dd = dd_seconds(os.path.join(work, "tensor"), dumped)
        dd_rate = dumped / dd
        ratios = [stat / base for base, stat in pairs]
        print(f"train_dump_bench: {MODEL} batch {SHAPE}, {STEPS} steps, iterations 1-{STEPS - 1} "
              f"dumped: {dumped / 1e6:.1f} MB of .npy; wall {base_wall:.2f} s without dump, "
              f"{tensor_wall:.2f} s with tensor dump (+{extra:.2f} s) -> {dump_rate / 1e6:.0f} MB/s; "
              f"dd wrote the same bytes in {dd:.2f} s -> {dd_rate / 1e6:.0f} MB/s")
        print(f"train_dump_bench: median step (steps 2..{STEPS}) {base_step * 1000:.1f} ms without "
              f"dump, {tensor_step * 1000:.1f} ms tensor dump; statistic dump against no dump, "
              f"{ROUNDS} pairs: " + ", ".join(f"{stat * 1000:.0f}/{base * 1000:.0f} ms"
                                               for base, stat in pairs))
        print(f"bench: train_dump_vs_dd ratio={dump_rate / dd_rate:.3f}")
        print(f"bench: train_statistic_vs_nodump ratio={statistics.median(ratios):.3f}")
    finally:
        benchutil.remove_tree(work)


if __name__ == "__main__":
    main()
