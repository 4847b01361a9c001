#!/usr/bin/env python3
"""An eager user's training script (no torch.jit) under `graphdump python`, against the same
script run by plain python (the Python running this bench: the project's venv, whose torch
`graphdump python` runs): whole processes as a user runs them, sides alternating, median of
rounds.

The script (bench/lib/eager_lm_training.py: a transformer language model, AdamW, a warmup
schedule, clipping) prints its step times; each run's step time is the median over steps
3..N (N is 30: over 8 steps, single runs of either side moved by up to 5%, more than the 3% the
configuration that selects nothing may cost). Per round, back to back:

  1. plain:     python eager_lm_training.py (the Python running the bench)
  2. off:       graphdump python with a configuration that selects nothing (an iteration the
                run never reaches): the module calls are bracketed, no operator is captured;
  3. statistic: graphdump python with a statistic dump (default categories) of every forward,
                backward and optimizer kernel of every step, synchronous;
  4. tensor:    graphdump python with a tensor dump of every kernel of one step (iteration 2),
                synchronous (the default), timed as that step's time above the plain run's
                median step, against dd writing the same bytes (the bytes of every file name);
  5. tensor, asynchronous: the same dump with background writers (e2e_dump_settings.enable
                false) in a run of TENSOR_STEP + 2 steps, timed from the dumped step's start to
                the process's end (so the writes still queued at the end count), against a
                plain run of as many steps over the same span.
Before the rounds, a calibration run (untimed) dumps the statistics of one steady step
(iteration 3) with the md5 category added; its statistic.csv gives what one step of run 3 has to
read: its kernels, its floating tensors and the bytes of the distinct ones, a tensor told apart
by (dtype, shape, MD5) only (two tensors of the same contents count once, so the count is a
lower bound, independent of graphdump's own reuse of a summary). Each round also measures the
single-core read bandwidth (NumPy reducing a 256 MiB resident float32 array: max, min, sum, the
best of 5), and the statistic dump's floor is those distinct bytes read once at that bandwidth.
Printed, as medians over BENCH_ROUNDS rounds:
  bench: eager_off_vs_plain ratio=X              (target <= 1.03)
  bench: eager_statistic_vs_plain ratio=X        (target <= 1.15)
  bench: eager_statistic_added_vs_floor ratio=X  (run 3's added step time over the floor;
                                                  target <= 1.25)
  bench: eager_statistic_floor_ms value=X        (the floor, with a line
                                                  `eager_statistic_floor: per step kernels=...`
                                                  giving the counts and the bandwidth)
  bench: eager_tensor_dump_vs_dd ratio=X         (dd's time / the added time; target >= 0.8)
  bench: eager_tensor_dump_async_vs_dd ratio=X   (the same for 5, dd's median time over the
                                                  median added time; not printed when that is
                                                  not above 0)
  bench: eager_tensor_files_alone_vs_dd ratio=X  (dd's time over the time a plain program takes
                                                  to write the same files, links and
                                                  directories: the best any writer of this
                                                  dump's files could reach)
  bench: eager_tensor_dump_vs_files_alone ratio=X (the same files' time alone / the added time:
                                                  the ratio of the two above; target >= 0.8)
  bench: eager_tensor_steady_dump_vs_files_alone ratio=X (the same for step TENSOR_STEP + 1 of
                                                  a dump of that step and the one before: a
                                                  dumped step after the first that captures,
                                                  which also finds every kernel and writes the
                                                  graph files; a diagnostic, no target)
A tensor dumped twice in the step with the same bytes is one file under two names (a hard
link); each round also prints the bytes actually written.
and the capture's cost per operator (bench/lib/eager_op_loop.py: 20,000 additions per call,
capture on with a `kernels` entry that selects none, against no configuration):
  bench: eager_capture_cost_per_operator_us value=X

Environment: GRAPHDUMP_BIN (the CLI), BENCH_STEPS (default 30), BENCH_ROUNDS (3), BENCH_MODEL
("LAYERS WIDTH SEQ BATCH", default "2 128 64 8"), BENCH_DIR (default a temporary directory).
The environment passes to every run, so OMP_NUM_THREADS=1 runs both sides on one intra-op
thread: on a machine shared with other work, torch's OpenMP workers spin-wait for a descheduled
peer and single steps of either side take seconds (seen on 2 shared cores).
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = benchutil.BIN
STEPS, ROUNDS, MODEL = benchutil.eager_lm_settings(steps=30)
SCRIPT = benchutil.EAGER_LM
LOOP = os.path.join(benchutil.LIB, "eager_op_loop.py")
LOOP_OPS = 20000
TENSOR_STEP = 2
COUNTED_STEP = 3  # the iteration the calibration run summarises with md5 (a steady step)
DEFAULT_CATEGORIES = ["max", "min", "l2norm"]


def run_printed(command, work):
    """What the script printed last (its JSON line) and when the process ended."""
    p, _ = benchutil.run_graphdump("eager_bench", command, work)
    end = time.monotonic()
    return benchutil.printed(p), end


def step_times(command, work):
    return run_printed(command, work)[0]["steps"]


def median_step(command, work):
    return benchutil.median_step("eager_bench", command, work)[0]


def seconds_from_tensor_step_to_end(command, work):
    printed, end = run_printed(command, work)
    return end - printed["starts"][TENSOR_STEP]


def dd_seconds(work, size):
    """dd writing `size` bytes in 1 MiB blocks to a new file in `work`, after a sync."""
    os.sync()
    start = time.monotonic()
    benchutil.dd_write(os.path.join(work, "dd.bin"), size, 1 << 20)
    seconds = time.monotonic() - start
    os.remove(os.path.join(work, "dd.bin"))
    return seconds


def main():
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_eager_bench_")
    os.makedirs(work, exist_ok=True)
    args = [SCRIPT, str(STEPS), *MODEL]
    short = [SCRIPT, str(TENSOR_STEP + 2), *MODEL]  # the asynchronous span: 2 steps after
    loop = [LOOP, str(STEPS), str(LOOP_OPS)]
    runs = iter(range(10 ** 6))

    def config(saved_data, iteration, asynchronous=False, **common):
        """A configuration dumping to a directory of its own: every run writes a new directory,
        and no dump is deleted before the bench ends (a file system busy freeing the last run's
        thousands of files is not what a user's run meets)."""
        n = next(runs)
        path = benchutil.write_dump_config(os.path.join(work, f"config{n}.json"),
                                           os.path.join(work, f"dump{n}"), saved_data, iteration,
                                           asynchronous=asynchronous, **common)
        return path, os.path.join(work, f"dump{n}")

    # What one step of the statistic dump reads: a run summarising step COUNTED_STEP with md5
    # too, its tensors told apart by (dtype, shape, md5), independently of graphdump's own reuse
    # of a summary (two tensors of equal contents count once: the floor is a lower bound).
    counting, counted = config("statistic", str(COUNTED_STEP),
                               statistic_category=DEFAULT_CATEGORIES + ["md5"])
    step_times([BIN, "python", "--config", counting, *args], work)
    counts = benchutil.distinct_tensors(counted, COUNTED_STEP)
    if not counts["float_tensors"]:
        sys.exit(f"eager_bench: no statistic rows of iteration {COUNTED_STEP} under {counted}")

    off_r, stat_r, floor_r, dd_r, per_op, alone_r, dump_alone_r, steady_r = (
        [] for _ in range(8))
    async_dd, async_added = [], []
    bandwidths = []
    for r in range(ROUNDS):
        plain = median_step([sys.executable, *args], work)
        never, _ = config("statistic", str(10 ** 6))
        off = median_step([BIN, "python", "--config", never, *args], work)
        stat, _ = config("statistic", "all")
        s = median_step([BIN, "python", "--config", stat, *args], work)
        bandwidths.append(benchutil.read_bandwidth())
        floor = counts["float_bytes"] / bandwidths[-1]
        tensor, dump = config("tensor", str(TENSOR_STEP))
        os.sync()
        dumped_step = step_times([BIN, "python", "--config", tensor, *args], work)[TENSOR_STEP]
        size, written = benchutil.npy_bytes(dump), benchutil.npy_unique_bytes(dump)
        files_alone = benchutil.write_same_files(dump, os.path.join(work, f"files{r}"))
        os.sync()
        two, two_dump = config("tensor", f"{TENSOR_STEP}-{TENSOR_STEP + 1}")
        steady_step = step_times([BIN, "python", "--config", two, *args], work)[TENSOR_STEP + 1]
        steady_alone = benchutil.write_same_files(
            benchutil.iteration_dir("eager_bench", two_dump, TENSOR_STEP + 1),
                                                  os.path.join(work, f"steady{r}"))
        os.sync()
        plain_tail = seconds_from_tensor_step_to_end([sys.executable, *short], work)
        tensor_async, _ = config("tensor", str(TENSOR_STEP), asynchronous=True)
        async_tail = seconds_from_tensor_step_to_end(
            [BIN, "python", "--config", tensor_async, *short], work)
        dd = dd_seconds(work, size)
        added = max(dumped_step - plain, 1e-6)
        bare = median_step([BIN, "python", *loop], work)
        selects_none, _ = config("statistic", "all", dump_mode=1, kernels=["no_such_operator"])
        captured = median_step([BIN, "python", "--config", selects_none, *loop], work)
        per_op.append((captured - bare) / LOOP_OPS * 1e6)
        off_r.append(off / plain)
        stat_r.append(s / plain)
        floor_r.append((s - plain) / floor)
        dd_r.append(dd / added)
        alone_r.append(dd / files_alone)
        dump_alone_r.append(files_alone / added)
        steady_r.append(steady_alone / max(steady_step - plain, 1e-6))
        async_dd.append(dd)
        async_added.append(async_tail - plain_tail)
        print(f"round {r + 1}: step plain {plain * 1e3:.1f} ms, off {off * 1e3:.1f} ms, statistic "
              f"{s * 1e3:.1f} ms (floor {floor * 1e3:.2f} ms at {bandwidths[-1] / 1e9:.1f} GB/s); "
              f"tensor step {dumped_step * 1e3:.1f} ms for "
              f"{size / 2**20:.1f} MiB in files ({written / 2**20:.1f} MiB written, the rest "
              f"links), the same files alone {files_alone * 1e3:.1f} ms, dd {dd * 1e3:.1f} ms; "
              f"asynchronous: to the end {async_tail:.2f} s against "
              f"{plain_tail:.2f} s; a later dumped step {steady_step * 1e3:.1f} ms, its files "
              f"alone {steady_alone * 1e3:.1f} ms; {LOOP_OPS} additions {bare * 1e3:.1f} ms, "
              f"captured {captured * 1e3:.1f} ms", flush=True)
    benchutil.remove_tree(work)
    print(f"bench: eager_off_vs_plain ratio={statistics.median(off_r):.3f}")
    print(f"bench: eager_statistic_vs_plain ratio={statistics.median(stat_r):.3f}")
    print(f"bench: eager_statistic_added_vs_floor ratio={statistics.median(floor_r):.2f}")
    bandwidth = statistics.median(bandwidths)
    print(f"bench: eager_statistic_floor_ms value={counts['float_bytes'] / bandwidth * 1e3:.2f}")
    print(f"eager_statistic_floor: per step kernels={counts['kernels']} rows={counts['rows']} "
          f"float_rows={counts['float_rows']} float_tensors={counts['float_tensors']} "
          f"distinct_MB={counts['float_bytes'] / 1e6:.1f} "
          f"other_tensors={counts['other_tensors']} other_MB={counts['other_bytes'] / 1e6:.2f} "
          f"bandwidth_GBps={bandwidth / 1e9:.2f} "
          f"floor_ms={counts['float_bytes'] / bandwidth * 1e3:.2f}")
    print(f"bench: eager_tensor_dump_vs_dd ratio={statistics.median(dd_r):.3f}")
    # Whole processes' ends vary by +-0.1 s here, as much as the writes still queued at the end:
    # the ratio of the medians, and none when the median run added no time.
    added = statistics.median(async_added)
    if added > 0:
        ratio = statistics.median(async_dd) / added
        print(f"bench: eager_tensor_dump_async_vs_dd ratio={ratio:.3f}")
    else:
        print(f"eager_tensor_dump_async_vs_dd: not measured: the asynchronous dump's runs ended "
              f"{-added * 1e3:.0f} ms before the plain runs (median), within the noise of "
              f"whole processes' ends")
    print(f"bench: eager_tensor_files_alone_vs_dd ratio={statistics.median(alone_r):.3f}")
    print(f"bench: eager_tensor_dump_vs_files_alone ratio={statistics.median(dump_alone_r):.3f}")
    print(f"bench: eager_tensor_steady_dump_vs_files_alone ratio={statistics.median(steady_r):.3f}")
    print(f"bench: eager_capture_cost_per_operator_us value={statistics.median(per_op):.2f}")


if __name__ == "__main__":
    main()
