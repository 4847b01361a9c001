"""Helpers of the tests of HuggingFace transformers models (test_hf_*.py): running a script with
the project's Python, and checking a dump's statistic.csv against NumPy's reading of its .npy
files."""
import csv
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np

from conftest import clean_env, graphdump

# Every category statistic.csv offers (docs/configuration.md), in its order.
ALL_CATEGORIES = ["max", "min", "avg", "count", "negative zero count", "positive zero count",
                  "nan count", "negative inf count", "positive inf count", "zero count", "md5",
                  "l2norm"]
HF_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
          "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "TOKENIZERS_PARALLELISM": "false"}


def plain_python(*args, timeout=600, cwd=None):
    """Runs a script with the Python running the tests (the project's environment, the one
    `graphdump python` runs scripts with), without graphdump; returns (CompletedProcess,
    wall seconds). Fails the test when the script fails."""
    start = time.monotonic()
    p = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                       env=clean_env(HF_ENV), timeout=timeout, cwd=cwd)
    wall = time.monotonic() - start
    assert p.returncode == 0, f"{sys.executable} {args} exited {p.returncode}:\n{p.stderr}"
    return p, wall


def dumped_python(config, *args, timeout=600, cwd=None):
    """`graphdump python --config CONFIG SCRIPT ARGS`; (CompletedProcess, wall seconds)."""
    start = time.monotonic()
    p = graphdump("python", "--config", config, *args, env=HF_ENV, timeout=timeout, cwd=cwd,
                  check=0)
    return p, time.monotonic() - start


def last_json_line(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def statistic_files(root):
    return sorted(glob.glob(os.path.join(str(root), "**", "statistic.csv"), recursive=True))


def statistic_rows(root):
    """[(directory, row dict)] of every statistic.csv under root, in file order."""
    rows = []
    for path in statistic_files(root):
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            for cells in reader:
                assert len(cells) == len(header) + 1 and cells[-1] == "", (path, cells)
                rows.append((os.path.dirname(path), dict(zip(header, cells))))
    return rows


def npy_files(root):
    return sorted(glob.glob(os.path.join(str(root), "**", "*.npy"), recursive=True))


def original_name(path):
    """A tensor file's name as the layout gives it: a basename over 255 bytes is written as
    {n}.npy and listed in mapping.csv beside it (docs/layout.md)."""
    base = os.path.basename(path)
    mapping = os.path.join(os.path.dirname(path), "mapping.csv")
    if base.split(".")[0].isdigit() and os.path.exists(mapping):
        with open(mapping, newline="") as f:
            for cells in csv.reader(f):
                if cells and cells[0] == base:
                    return cells[1]
    return base


def _g6(x):
    """A number as statistic.csv prints it (C++'s default stream: 6 significant digits)."""
    return f"{x:.6g}"


def _close_6_digits(cell, expected):
    """Is the printed `cell` NumPy's double `expected`, to the 6 digits printed (one unit in
    the last printed digit for sums, whose order of addition may differ)?"""
    if np.isnan(expected):
        return cell == "nan"
    if np.isinf(expected):
        return cell == ("inf" if expected > 0 else "-inf")
    if cell == _g6(expected):
        return True
    value = float(cell)
    return abs(value - expected) <= 1e-5 * max(abs(expected), 1e-30)


def numpy_statistics(a):
    """What statistic.csv's categories hold for the array `a`, by NumPy in double precision."""
    x = a.astype(np.float64).ravel()  # bool as 0/1, integers and floats exactly
    finite = x[~np.isnan(x)]
    out = {"Count": x.size, "NaN Count": int(np.isnan(x).sum()),
           "Negative Inf Count": int(np.isneginf(x).sum()),
           "Positive Inf Count": int(np.isposinf(x).sum()),
           "Negative Zero Count": int((finite < 0).sum()),
           "Positive Zero Count": int((finite > 0).sum()),
           "Zero Count": int((x == 0).sum()),
           "MD5": hashlib.md5(np.ascontiguousarray(a).tobytes()).hexdigest()}
    if x.size == 0:
        out.update({"Max Value": 0.0, "Min Value": 0.0, "Avg Value": 0.0, "L2Norm Value": 0.0})
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            out.update({"Max Value": x.max(), "Min Value": x.min(), "Avg Value": x.mean(),
                        "L2Norm Value": np.sqrt((x * x).sum())})
    return out


EXACT = ("Max Value", "Min Value")  # a float32 element printed: no summation involved
SUMS = ("Avg Value", "L2Norm Value")
COUNTS = ("Count", "NaN Count", "Negative Inf Count", "Positive Inf Count",
          "Negative Zero Count", "Positive Zero Count", "Zero Count")


def check_statistics_against_numpy(root):
    """Every statistic.csv row under `root` against NumPy's statistics of its tensor's .npy file
    (saved_data full: each row has its file). Returns (rows checked, the dtypes seen)."""
    rows = statistic_rows(root)
    assert rows, f"no statistic.csv rows under {root}"
    files = {}
    for path in npy_files(root):
        parts = original_name(path).split(".")
        # {op_type}.{op_name}.{task}.{stream}.{timestamp}.{io}.{slot}.{format}.{dtype}.npy
        files[(os.path.dirname(path), parts[1], parts[4], parts[5], parts[6])] = path
    dtypes = set()
    problems = []
    for directory, row in rows:
        key = (directory, row["Op Name"], row["Timestamp"], row["IO"], row["Slot"])
        assert key in files, f"statistic.csv row with no tensor file: {key}"
        a = np.load(files[key])
        dtypes.add(row["Data Type"])
        shape = "(" + ",".join(str(d) for d in a.shape) + ")"
        if row["Shape"] != shape:
            problems.append((files[key], "Shape", row["Shape"], shape))
        expected = numpy_statistics(a)
        for column in EXACT:
            if column in row and row[column] != _g6(expected[column]):
                problems.append((files[key], column, row[column], _g6(expected[column])))
        for column in SUMS:
            if column in row and not _close_6_digits(row[column], expected[column]):
                problems.append((files[key], column, row[column], expected[column]))
        for column in COUNTS:
            if column in row and int(row[column]) != expected[column]:
                problems.append((files[key], column, row[column], expected[column]))
        if "MD5" in row and row["Data Type"] != "bfloat16" and row["MD5"] != expected["MD5"]:
            problems.append((files[key], "MD5", row["MD5"], expected["MD5"]))
    assert not problems, f"{len(problems)} statistic.csv cells differ from NumPy: {problems[:10]}"
    return len(rows), dtypes


def ls_totals(root):
    return json.loads(graphdump("ls", root, "--json", check=0).stdout)["total"]
