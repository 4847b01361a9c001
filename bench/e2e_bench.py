#!/usr/bin/env python3
"""The dump's speed and memory targets, timed end to end: whole `graphdump` processes as a user
runs them, the two sides of each ratio alternating, BENCH_ROUNDS rounds, medians printed.

Rows (examples/make_models.py makes the models; x.npy is a 256 MiB float32 input, 8192x8192):

  first_step_selecting_nothing_vs_off  `graphdump run times_one.pt --input x.npy` (x * 1.0),
      step 1's time with a configuration that selects no kernel against no configuration.
      Target <= 1.05.
  numpy_vs_statistics_added  the same model with saved_data "statistic" of its output, the
      eleven statistics other than md5: the whole run's wall time minus the run without dump
      (the time dumping added), against NumPy computing the same eleven on the same array
      (each one call, as a user would). Target >= 10.
  dd_vs_tensor_dump_added  the same model dumping its 256 MiB output as a tensor file,
      asynchronous mode, the run then `sync`: the time added to a run without dump (also
      followed by `sync`), against `dd` writing 256 MiB then `sync`. Target >= 0.8.
  train_statistic_vs_off_steps / _process  `graphdump train demo_alexnet.pt`, batch 8 of
      64x64 images (BENCH_TRAIN_SHAPE), BENCH_STEPS steps, statistic dump of every kernel of
      every iteration against no dump: the median step time of steps 2..N, and the whole
      process's wall time. Target <= 1.15.
  train_peak_rss_statistic_vs_off  `graphdump train wide_mlp.pt` (128 MiB of parameters),
      statistic dump against no dump: peak resident memory of the process. Target: no more
      than the asynchronous queue's budget above dumping off (printed as a ratio and in MiB).

Environment: GRAPHDUMP_BIN (the CLI), BENCH_ROUNDS (default 3), BENCH_STEPS (default 5),
BENCH_TRAIN_SHAPE (default 8x3x64x64), BENCH_DIR (default a temporary directory).
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

BIN = os.environ.get("GRAPHDUMP_BIN", "build/tools/graphdump")
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "3")))
STEPS = max(3, int(os.environ.get("BENCH_STEPS", "5")))
TRAIN_SHAPE = os.environ.get("BENCH_TRAIN_SHAPE", "8x3x64x64")
STEP_LINE = re.compile(r"^step (\d+)/\d+:.*\(([0-9.]+) s\)", re.M)
ELEVEN = ["max", "min", "avg", "count", "negative zero count", "positive zero count",
          "nan count", "negative inf count", "positive inf count", "zero count", "l2norm"]


def config(work, name, **common):
    settings = {"dump_mode": 0, "path": os.path.join(work, "dump_" + name), "net_name": "Net",
                "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
                "support_device": [0]}
    asynchronous = common.pop("asynchronous", False)
    settings.update(common)
    doc = {"common_dump_settings": settings}
    if asynchronous:
        doc["e2e_dump_settings"] = {"enable": False}
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path, settings["path"]


def run(args, work, dump_dir=None, then_sync=False):
    """Runs a whole process (after removing `dump_dir` and a `sync`, so each run starts from the
    same state); returns (stdout, wall seconds)."""
    if dump_dir:
        benchutil.remove_tree(dump_dir)
    subprocess.run(["sync"], check=True)
    start = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, cwd=work,
                       env={k: v for k, v in os.environ.items()
                            if k not in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG")})
    if then_sync:
        subprocess.run(["sync"], check=True)
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"e2e_bench: {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout, wall


def peak_rss(args, work, dump_dir=None):
    """Peak resident memory (KiB) of one run, measured by GNU time in its own child."""
    if dump_dir:
        benchutil.remove_tree(dump_dir)
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *args], capture_output=True, text=True,
                       cwd=work)
    if p.returncode != 0:
        sys.exit(f"e2e_bench: {' '.join(args)} failed:\n{p.stderr}")
    return int(p.stderr.strip().splitlines()[-1])


def steps(stdout):
    return {int(n): float(t) for n, t in STEP_LINE.findall(stdout)}


def numpy_eleven_seconds(x_path):
    """NumPy computing the eleven statistics of the array (load not counted), in a child."""
    code = """
import sys, time, numpy as np
x = np.load(sys.argv[1])
t = time.perf_counter()
x.max(); x.min(); x.mean(dtype=np.float64); x.size; (x < 0).sum(); (x > 0).sum()
np.isnan(x).sum(); (x == -np.inf).sum(); (x == np.inf).sum(); (x == 0).sum()
np.sqrt(np.square(x, dtype=np.float64).sum())
print(time.perf_counter() - t)
"""
    p = subprocess.run([sys.executable, "-c", code, x_path], capture_output=True, text=True,
                       check=True)
    return float(p.stdout)


def main():
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_e2e_bench_")
    os.makedirs(work, exist_ok=True)
    print(f"making models and a 256 MiB input in {work}", flush=True)
    times_one = benchutil.make_model(work, "times_one")
    alexnet = benchutil.make_model(work, "demo_alexnet")
    wide = benchutil.make_model(work, "wide_mlp")
    x = os.path.join(work, "x.npy")
    subprocess.run([sys.executable, "-c",
                    "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0)"
                    ".standard_normal((8192, 8192), dtype=np.float32))", x], check=True)
    nothing, nothing_dir = config(work, "nothing", dump_mode=1, kernels=["no_such_kernel"])
    stats, stats_dir = config(work, "stats", saved_data="statistic", input_output=2,
                              statistic_category=ELEVEN)
    tensor, tensor_dir = config(work, "tensor", input_output=2, asynchronous=True)
    train_stats, train_dir = config(work, "train", saved_data="statistic")
    run_x = [BIN, "run", times_one, "--input", x]

    first, stat_ratio, tensor_ratio, step_ratio, process_ratio = [], [], [], [], []
    for r in range(ROUNDS):
        off_out, off_wall = run(run_x + ["--steps", "2"], work)
        sel_out, _ = run(run_x + ["--steps", "2", "--config", nothing], work, nothing_dir)
        first.append(steps(sel_out)[1] / steps(off_out)[1])

        off1_out, off1_wall = run(run_x + ["--steps", "1"], work)
        _, stat_wall = run(run_x + ["--steps", "1", "--config", stats], work, stats_dir)
        stat_ratio.append(numpy_eleven_seconds(x) / max(stat_wall - off1_wall, 1e-3))

        _, off_sync = run(run_x + ["--steps", "1"], work, then_sync=True)
        _, tensor_sync = run(run_x + ["--steps", "1", "--config", tensor], work, tensor_dir,
                             then_sync=True)
        benchutil.remove_tree(tensor_dir)
        start = time.monotonic()
        benchutil.dd_write(os.path.join(work, "dd.bin"), 256 << 20, 1 << 20)
        subprocess.run(["sync"], check=True)
        dd = time.monotonic() - start
        os.remove(os.path.join(work, "dd.bin"))
        tensor_ratio.append(dd / max(tensor_sync - off_sync, 1e-3))

        train = [BIN, "train", alexnet, "--steps", str(STEPS), "--input-shape", TRAIN_SHAPE,
                 "--classes", "10"]
        t_off, t_off_wall = run(train, work)
        t_stat, t_stat_wall = run(train + ["--config", train_stats], work, train_dir)
        med = lambda out: statistics.median(t for n, t in steps(out).items() if n >= 2)
        step_ratio.append(med(t_stat) / med(t_off))
        process_ratio.append(t_stat_wall / t_off_wall)
        print(f"round {r + 1}: first step {first[-1]:.3f}, numpy/stat {stat_ratio[-1]:.2f}, "
              f"dd/tensor {tensor_ratio[-1]:.2f}, train steps {step_ratio[-1]:.3f}, "
              f"train process {process_ratio[-1]:.3f}", flush=True)

    wide_train = [BIN, "train", wide, "--steps", "2", "--input-shape", "32x256", "--classes",
                  "10"]
    rss_off = peak_rss(wide_train, work)
    rss_stat = peak_rss(wide_train + ["--config", train_stats], work, train_dir)
    benchutil.remove_tree(work)
    median = statistics.median
    print(f"bench: first_step_selecting_nothing_vs_off ratio={median(first):.3f}")
    print(f"bench: numpy_vs_statistics_added ratio={median(stat_ratio):.2f}")
    print(f"bench: dd_vs_tensor_dump_added ratio={median(tensor_ratio):.2f}")
    print(f"bench: train_statistic_vs_off_steps ratio={median(step_ratio):.3f}")
    print(f"bench: train_statistic_vs_off_process ratio={median(process_ratio):.3f}")
    print(f"bench: train_peak_rss_statistic_vs_off ratio={rss_stat / rss_off:.3f} "
          f"({rss_off / 1024:.0f} MiB off, {rss_stat / 1024:.0f} MiB statistic)")


if __name__ == "__main__":
    main()
