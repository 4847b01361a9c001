#!/usr/bin/env python3
"""Where a training's steady steps spend their CPU time, per thread, in milliseconds a step.

    python bench/lib/steady_profile.py [--top N] [--by dso|symbol] [--steps A:B] -- COMMAND...

COMMAND is one of the bench's training scripts (bench/lib/eager_lm_training.py,
schedule_training.py, ...), plain or under `graphdump python`: its last line of output is a JSON
object whose "starts" lists each step's start (time.monotonic()). COMMAND runs under
`perf record -k CLOCK_MONOTONIC`, so that the samples' times are the script's own clock, and
only the samples from the start of step 6 to the start of the last step count: start-up (imports,
the first steps' allocations, compilation) and the interpreter's exit (its garbage collection
alone can be a tenth of a whole-process profile) are left out. `--steps A:B` counts steps A to B
instead (from step A's start to step B's, counting from 0; B may be negative, from the end), to
compare a long training's early steps with its late ones. Printed: each thread's CPU
milliseconds a step, then, for the busiest thread (the training's) and the next one, the top
shared objects or symbols. Comparing a plain run with a dumped one, thread by thread, gives what
a dump adds to the training thread and what its helper threads do beside it. `--faults` counts
page faults instead of CPU time (each one, where the faulting instruction ran): memory a step
touches for the first time, as when the C library's heap grows because what it freed cannot
hold what the step allocates next.

A diagnostic, not a benchmark: it prints no `bench:` line (scripts/bench runs bench/*.py only).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

import benchutil

FIRST_STEP = 5  # steps before this one warm up
FREQUENCY = 4000  # samples a second


def perf(command):
    """Runs `perf COMMAND...`; exits naming it when perf is missing or fails."""
    try:
        run = subprocess.run(["perf", *command], capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("steady_profile: perf is not installed (Debian's linux-perf package)")
    if run.returncode != 0:
        sys.exit(f"steady_profile: perf {' '.join(command)} failed ({run.returncode}):\n"
                 f"{run.stderr[-2000:]}")
    return run


def steps_window(text):
    """(A, B) of "A:B"."""
    try:
        first, last = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected A:B, two step numbers ('5:-1')")
    return first, last


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="rows per thread (default 25)")
    parser.add_argument("--by", choices=("dso", "symbol"), default="dso")
    parser.add_argument("--steps", type=steps_window, default=(FIRST_STEP, -1), metavar="A:B",
                        help=f"the steps counted, from A's start to B's (default "
                             f"{FIRST_STEP}:-1: all but the first {FIRST_STEP} and the last)")
    parser.add_argument("--faults", action="store_true",
                        help="count page faults a step instead of CPU milliseconds")
    parser.add_argument("command", nargs="+", help="the training command, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="steady_profile_") as work:
        data = os.path.join(work, "perf.data")
        sampling = ["-e", "page-faults", "-c", "1"] if args.faults else ["-F", str(FREQUENCY)]
        run = perf(["record", "-q", "-k", "CLOCK_MONOTONIC", *sampling, "-o", data,
                    "--", *args.command])
        try:
            starts = benchutil.printed(run)["starts"]
        except (IndexError, KeyError, TypeError, ValueError):
            sys.exit("steady_profile: the command's last line of output is not a JSON object "
                     "with \"starts\" (the bench's training scripts print one)")
        first, last = (a if a >= 0 else len(starts) + a for a in args.steps)
        if not 0 <= first < last < len(starts):
            sys.exit(f"steady_profile: {len(starts)} steps, so steps {first}:{last} cannot be "
                     "counted; run more steps or count fewer")
        steps = last - first
        window = f"{starts[first]:.6f},{starts[last]:.6f}"
        text = perf(["script", "-i", data, "--time", window, "-F", "tid,ip,sym,dso"]).stdout
    per_thread = collections.Counter()
    rows = collections.defaultdict(collections.Counter)
    for line in text.splitlines():
        match = re.match(r"\s*(\d+)\s+\S+\s+(.*)\((\S+)\)\s*$", line)
        if not match:
            continue
        tid, symbol, dso = match.groups()
        per_thread[tid] += 1
        dso = os.path.basename(dso)
        rows[tid][dso if args.by == "dso" else f"{dso[:14]:14} {symbol.strip()[:120]}"] += 1

    def per_step(samples):
        return samples / steps if args.faults else samples / FREQUENCY / steps * 1e3

    unit = "faults" if args.faults else "ms"
    print(f"{steps} steady steps ({window} s, CLOCK_MONOTONIC)")
    print(("page faults" if args.faults else "CPU ms") + " a step by thread: " +
          ", ".join(f"{tid} {per_step(n):.2f}" for tid, n in per_thread.most_common()))
    for tid, _ in per_thread.most_common(2):
        print(f"thread {tid}:")
        for key, n in rows[tid].most_common(args.top):
            print(f"  {per_step(n):8.3f} {unit:6} {key}")


if __name__ == "__main__":
    main()
