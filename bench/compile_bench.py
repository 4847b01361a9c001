#!/usr/bin/env python3
"""A torch.compile'd training under `graphdump python`, against the same script run by the plain
Python: whole processes as a user runs them, sides alternating, median of rounds.

The script is bench/lib/eager_lm_training.py --compile (the transformer LM of eager_bench.py,
compiled with torch.compile(model); AdamW, a warmup schedule, clipping). It prints its step
times; step 1 compiles the forward and backward graphs. Every run gets an empty Inductor cache
directory (TORCHINDUCTOR_CACHE_DIR), so both sides compile from scratch, as graphdump always does
while dumping (docs/compile.md). Per round, back to back (in reverse order every other round):

  1. plain:     python eager_lm_training.py --compile
  2. off:       graphdump python with a configuration that selects nothing (an iteration the
                run never reaches): the compiled graphs are instrumented, no kernel is dumped
  3. statistic: graphdump python with a statistic dump (default categories) of every kernel
                (compiled, eager, backward, optimizer) of every step, synchronous
Printed, as medians over BENCH_ROUNDS rounds (steps 3..N for the step times):
  bench: compile_off_vs_plain ratio=X              (target <= 1.03)
  bench: compile_statistic_vs_plain ratio=X        (target <= 1.25)
  bench: compile_first_step_off_vs_plain ratio=X   (step 1, compilation included; target <= 1.10)

Environment: GRAPHDUMP_BIN (the CLI), BENCH_STEPS (default 10), BENCH_ROUNDS (3), BENCH_MODEL
("LAYERS WIDTH SEQ BATCH", default "2 128 64 8"), BENCH_DIR (default a temporary directory).
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = benchutil.BIN
STEPS, ROUNDS, MODEL = benchutil.eager_lm_settings()
SCRIPT = benchutil.EAGER_LM


def main():
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_compile_bench_")
    os.makedirs(work, exist_ok=True)
    args = [SCRIPT, str(STEPS), *MODEL, "--compile"]
    runs = iter(range(10 ** 6))

    def steps(command):
        """The step times of one run, with an Inductor cache of its own."""
        cache = os.path.join(work, f"inductor{next(runs)}")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        try:
            p, _ = benchutil.run_graphdump("compile_bench", command, work)
        finally:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]
        return benchutil.printed(p)["steps"]

    def config(iteration):
        n = next(runs)
        return benchutil.write_dump_config(os.path.join(work, f"config{n}.json"),
                                           os.path.join(work, f"dump{n}"), "statistic", iteration)

    off_r, stat_r, first_r = [], [], []
    sides = {"plain": lambda: steps([sys.executable, *args]),
             "off": lambda: steps([BIN, "python", "--config", config(str(10 ** 6)), *args]),
             "statistic": lambda: steps([BIN, "python", "--config", config("all"), *args])}
    for r in range(ROUNDS):
        got = {side: sides[side]() for side in benchutil.alternate(r, sides)}
        plain, off, stat = got["plain"], got["off"], got["statistic"]
        p, o, s = (statistics.median(x[2:]) for x in (plain, off, stat))
        off_r.append(o / p)
        stat_r.append(s / p)
        first_r.append(off[0] / plain[0])
        print(f"round {r + 1}: step plain {p * 1e3:.1f} ms, off {o * 1e3:.1f} ms, statistic "
              f"{s * 1e3:.1f} ms; first step plain {plain[0]:.2f} s, off {off[0]:.2f} s, "
              f"statistic {stat[0]:.2f} s", flush=True)
    benchutil.remove_tree(work)
    print(f"bench: compile_off_vs_plain ratio={statistics.median(off_r):.3f}")
    print(f"bench: compile_statistic_vs_plain ratio={statistics.median(stat_r):.3f}")
    print(f"bench: compile_first_step_off_vs_plain ratio={statistics.median(first_r):.3f}")


if __name__ == "__main__":
    main()
