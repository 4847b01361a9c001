"""Helpers the benchmark scripts of bench/ share (scripts/bench runs only bench/*.py, not this)."""
import csv
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

# The repository whose examples/ the benchmarks use (GRAPHDUMP_SOURCE_DIR, else the one holding
# this file).
SOURCE = os.environ.get("GRAPHDUMP_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The graphdump CLI the benchmarks run (GRAPHDUMP_BIN).
BIN = os.environ.get("GRAPHDUMP_BIN", "build/tools/graphdump")
# This folder: the training scripts the benchmarks run.
LIB = os.path.dirname(os.path.abspath(__file__))
# The eager language-model training of eager_bench.py and msprobe_bench.py, and its size
# ("LAYERS WIDTH SEQ BATCH", BENCH_MODEL).
EAGER_LM = os.path.join(LIB, "eager_lm_training.py")
EAGER_LM_MODEL = "2 128 64 8"


def env_int(name, default, least):
    """The whole number in environment variable `name` (else `default`), at least `least`."""
    return max(least, int(os.environ.get(name, str(default))))


def rounds(default=3):
    """BENCH_ROUNDS, at least 1."""
    return env_int("BENCH_ROUNDS", default, 1)


def eager_lm_settings(steps=10):
    """(BENCH_STEPS, at least 5, default `steps`; BENCH_ROUNDS; BENCH_MODEL's "LAYERS WIDTH SEQ
    BATCH" as a list) for the benches that run the transformer LM of eager_lm_training.py."""
    return (env_int("BENCH_STEPS", steps, 5), rounds(),
            os.environ.get("BENCH_MODEL", EAGER_LM_MODEL).split())


def alternate(r, sides):
    """`sides` in the order round `r` runs them: as given in even rounds, reversed in odd ones,
    so that neither side always runs first."""
    return list(sides) if r % 2 == 0 else list(reversed(sides))


def make_model(work, name):
    """Makes model `name` with examples/make_models.py into `work`; returns the .pt path."""
    subprocess.run([sys.executable, os.path.join(SOURCE, "examples", "make_models.py"), work,
                    name], check=True, capture_output=True)
    return os.path.join(work, name + ".pt")


def run_graphdump(name, args, work):
    """Runs `args` (the graphdump CLI and its arguments) in `work` without the dump variables of
    the caller's environment; exits naming the script `name` when it fails. Returns
    (CompletedProcess, wall seconds)."""
    env = dict(os.environ)
    for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG"):
        env.pop(key, None)
    start = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, env=env, cwd=work)
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"{name}: {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p, wall


def printed(p):
    """The JSON object a training script printed as its last line (CompletedProcess `p`)."""
    return json.loads(p.stdout.strip().splitlines()[-1])


def median_step(name, command, work):
    """Runs `command` as run_graphdump does; returns (the median of the step times the script
    printed ("steps"), steps 3..N: the first two warm up; the process's wall seconds)."""
    p, wall = run_graphdump(name, command, work)
    return statistics.median(printed(p)["steps"][2:]), wall


def dd_write(path, size, block):
    """Writes at least `size` zero bytes to `path` with dd, in blocks of `block` bytes: the
    baseline the write benchmarks compare against (no sync, like graphdump by default)."""
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", f"bs={block}",
                    f"count={max(1, -(-size // block))}"], check=True, capture_output=True)


def write_dump_config(path, dump_path, saved_data, iteration, devices=(0,), asynchronous=False,
                      **common):
    """Writes a data_dump.json that dumps every kernel's inputs and outputs (dump_mode 0) of
    `iteration` to `dump_path`; `asynchronous` sets e2e_dump_settings.enable false, and `common`
    sets further common_dump_settings (dump_mode=1, kernels=[...]; statistic_category=[...])."""
    config = {"common_dump_settings": {
        "dump_mode": 0, "path": dump_path, "net_name": "Net", "iteration": iteration,
        "saved_data": saved_data, "input_output": 0, "kernels": [],
        "support_device": list(devices), **common}}
    if asynchronous:
        config["e2e_dump_settings"] = {"enable": False}
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def iteration_dir(name, dump, iteration):
    """The directory of one iteration's files in the dump `dump` (rank_0/NET/GRAPH/ITERATION);
    exits naming the script `name` unless there is exactly one."""
    found = glob.glob(os.path.join(dump, "rank_0", "*", "*", str(iteration)))
    if len(found) != 1:
        sys.exit(f"{name}: expected one directory of iteration {iteration} under {dump}, "
                 f"found {found}")
    return found[0]


def npy_bytes(root):
    """Bytes of every .npy file under `root` (a file with several names counts once per name)."""
    total = 0
    for d, _, files in os.walk(root):
        total += sum(os.path.getsize(os.path.join(d, f)) for f in files if f.endswith(".npy"))
    return total


def npy_files(root):
    """The .npy files under `root`, one entry per file (its hard links together):
    {(device, inode): [size, names relative to `root`, in walk order]}."""
    files = {}
    for d, _, names in os.walk(root):
        for f in sorted(names):
            if f.endswith(".npy"):
                st = os.stat(os.path.join(d, f))
                entry = files.setdefault((st.st_dev, st.st_ino), [st.st_size, []])
                entry[1].append(os.path.relpath(os.path.join(d, f), root))
    return files


def npy_unique_bytes(root):
    """Bytes of the .npy files under `root` counted once per file (hard links once): the bytes
    actually written."""
    return sum(size for size, _ in npy_files(root).values())


def write_same_files(root, into, between=None):
    """Writes, under the new directory `into`, the .npy files of the dump `root` as plainly as a
    program can: the same directories, each file's bytes (read into memory of its own before the
    clock starts, as a program's tensors lie in memory of their own: one buffer reused for every
    file would stay in the CPU's caches and copy faster than any program's data) written under a
    temporary name and renamed (no file is ever torn), each further name of a file a hard link.
    Returns the seconds it took: what the dump's files cost the file system, with no capture
    around them. `between`, when given, is called before each file, its own time not counted
    (other work between the writes, as a training's kernels run between a dump's files)."""
    files = npy_files(root)
    contents = []
    for size, names in files.values():
        with open(os.path.join(root, names[0]), "rb") as f:
            contents.append(f.read())
    os.sync()
    start = time.monotonic()
    made = set()
    for (size, names), data in zip(files.values(), contents):
        if between is not None:
            paused = time.monotonic()
            between()
            start += time.monotonic() - paused
        for name in names:
            parent = os.path.dirname(os.path.join(into, name))
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
        first = os.path.join(into, names[0])
        temporary = first + ".tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
        os.rename(temporary, first)
        for name in names[1:]:
            os.link(first, os.path.join(into, name))
    return time.monotonic() - start


def read_bandwidth(repetitions=5, mib=256):
    """Bytes a second one core reads: NumPy reducing (max, min, sum) a `mib` MiB float32 array
    resident in memory (far larger than the caches), in a child process; the best of
    `repetitions` rounds of each, so that the floor it gives is never flattering."""
    code = f"""
import time, numpy as np
x = np.ones({mib} << 18, dtype=np.float32)
best = float("inf")
for _ in range({repetitions}):
    for reduce in (np.max, np.min, np.sum):
        start = time.perf_counter()
        reduce(x)
        best = min(best, time.perf_counter() - start)
print(x.nbytes / best)
"""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env=env)
    return float(p.stdout)


FLOATING = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def distinct_tensors(dump, iteration):
    """What one iteration of the statistic dump `dump` (made with the md5 category) summarised:
    {"rows", "kernels", "float_rows", "float_tensors", "float_bytes", "other_tensors",
    "other_bytes"}. Tensors are told apart by (dtype, shape, md5) alone, so two tensors of the
    same contents count once: a lower bound of the distinct tensors and of their bytes."""
    rows = kernels = 0
    seen = {True: {}, False: {}}
    float_rows = 0
    for path in glob.glob(os.path.join(dump, "rank_*", "*", "*", str(iteration),
                                       "statistic.csv")):
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            column = {name: i for i, name in enumerate(header)}
            names = set()
            for row in reader:
                rows += 1
                if row[column["Op Type"]] != "Parameter":  # a parameter's row is no kernel
                    names.add(row[column["Op Name"]])
                dtype = row[column["Data Type"]]
                floating = dtype in FLOATING
                float_rows += floating
                key = (dtype, row[column["Shape"]], row[column["MD5"]])
                seen[floating][key] = int(row[column["Data Size"]])
            kernels += len(names)
    return {"rows": rows, "kernels": kernels, "float_rows": float_rows,
            "float_tensors": len(seen[True]), "float_bytes": sum(seen[True].values()),
            "other_tensors": len(seen[False]), "other_bytes": sum(seen[False].values())}


def remove_tree(path):
    """Removes a scratch directory holding a dump (its files and directories are read-only)."""
    for root, dirs, files in os.walk(path):
        for entry in dirs + files:
            os.chmod(os.path.join(root, entry), 0o700)
    shutil.rmtree(path, ignore_errors=True)
