#!/usr/bin/env python3
"""graphdump against the closest peer, msprobe (mindstudio-probe 26.2.0, MindStudio's precision
debugger), on the same eager training script: statistics of every operator of every step.

Whole processes as a user runs them, sides alternating, median of rounds; each run's step time
is the median over steps 3..N of bench/lib/eager_lm_training.py. Per round:

  1. plain:    python eager_lm_training.py (the peer's environment)
  2. msprobe:  the same script with msprobe's documented calls (PrecisionDebugger, start(model),
               stop(), step()), task "statistics", level "L1" (every API call), every step
  3. plain:    python eager_lm_training.py (the project's environment)
  4. graphdump: graphdump python with a statistic dump of every forward, backward and optimizer
               kernel of every step (the script unchanged)
Printed, as medians over BENCH_ROUNDS rounds:
  bench: msprobe_statistics_vs_plain ratio=X
  bench: graphdump_statistics_vs_plain ratio=X
  bench: msprobe_added_over_graphdump_added ratio=X   (target >= 10: msprobe's added time per
                                                      step over graphdump's)

msprobe runs in an environment of its own (BENCH_MSPROBE_VENV, default build/msprobe-venv),
made on first use with torch==2.13.0 and mindstudio-probe==26.2.0 from the package index; this
bench is part of `make bench`, never of `make test`.

Environment: GRAPHDUMP_BIN, BENCH_STEPS (default 10), BENCH_ROUNDS (3), BENCH_MODEL
("LAYERS WIDTH SEQ BATCH", default "2 128 64 8").
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = benchutil.BIN
STEPS, ROUNDS, MODEL = benchutil.eager_lm_settings()
SCRIPT = benchutil.EAGER_LM
VENV = os.environ.get("BENCH_MSPROBE_VENV",
                      os.path.join(benchutil.SOURCE, "build", "msprobe-venv"))
PEER = ["torch==2.13.0", "mindstudio-probe==26.2.0"]


def peer_python():
    """The peer's environment's Python, made once (pip, pinned)."""
    python = os.path.join(VENV, "bin", "python")
    stamp = os.path.join(VENV, ".bench-peer")
    if not (os.path.exists(stamp) and open(stamp).read() == " ".join(PEER)):
        print(f"msprobe_bench: making {VENV} with {' '.join(PEER)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *PEER], check=True)
        with open(stamp, "w") as f:
            f.write(" ".join(PEER))
    return python


def median_step(command, work):
    return benchutil.median_step("msprobe_bench", command, work)[0]


def main():
    peer = peer_python()
    work = tempfile.mkdtemp(prefix="msprobe_bench_")
    msprobe_config = os.path.join(work, "msprobe.json")
    with open(msprobe_config, "w") as f:
        json.dump({"task": "statistics", "dump_path": os.path.join(work, "msprobe_dump"),
                   "rank": [], "step": [], "level": "L1",
                   "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                  "summary_mode": "statistics"}}, f)
    config = benchutil.write_dump_config(os.path.join(work, "data_dump.json"),
                                         os.path.join(work, "graphdump_dump"), "statistic", "all")
    args = [SCRIPT, str(STEPS), *MODEL]
    ratios = {"msprobe": [], "graphdump": [], "added": []}
    for r in range(ROUNDS):
        peer_plain = median_step([peer, *args], work)
        msprobe = median_step([peer, *args, "--msprobe", msprobe_config], work)
        plain = median_step([sys.executable, *args], work)
        ours = median_step([BIN, "python", "--overwrite", "--config", config, *args], work)
        ratios["msprobe"].append(msprobe / peer_plain)
        ratios["graphdump"].append(ours / plain)
        ratios["added"].append((msprobe - peer_plain) / max(ours - plain, 1e-9))
        print(f"round {r}: step plain {peer_plain * 1e3:.1f} ms, msprobe {msprobe * 1e3:.1f} ms;"
              f" plain {plain * 1e3:.1f} ms, graphdump {ours * 1e3:.1f} ms", flush=True)
    print(f"bench: msprobe_statistics_vs_plain ratio={statistics.median(ratios['msprobe']):.2f}")
    print(f"bench: graphdump_statistics_vs_plain "
          f"ratio={statistics.median(ratios['graphdump']):.2f}")
    print(f"bench: msprobe_added_over_graphdump_added "
          f"ratio={statistics.median(ratios['added']):.1f}")


if __name__ == "__main__":
    main()
