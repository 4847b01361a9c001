"""Shared helpers of the Python package's tests (pytest, run by `make test` through ctest).

The package is imported from the build directory (BUILD/python); `graphdump python` runs are the
built CLI, as a user runs it."""
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("GRAPHDUMP_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(
                                os.path.abspath(__file__)))))
BUILD_DIR = os.environ.get("GRAPHDUMP_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
BIN = os.path.join(BUILD_DIR, "tools", "graphdump")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BUILD_DIR, "python"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e"))
import gdtest  # noqa: E402  (its configuration writer)

# Variables that would turn dumping on behind a test's back.
_DUMP_ENV = ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH")


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in _DUMP_ENV}
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


def graphdump(*args, env=None, timeout=300, cwd=None, check=None):
    """Runs the graphdump CLI; returns the CompletedProcess (text)."""
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True,
                       env=clean_env(env), timeout=timeout, cwd=cwd)
    if check is not None:
        assert p.returncode == check, (f"graphdump {' '.join(map(str, args))} exited "
                                       f"{p.returncode}, expected {check}\nstdout:\n{p.stdout}\n"
                                       f"stderr:\n{p.stderr}")
    return p


def python(*args, env=None, timeout=300, cwd=None, check=None):
    """Runs the project's Python (the one running the tests, whose torch `graphdump python`
    runs too) without graphdump; returns the CompletedProcess (text)."""
    p = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                       env=clean_env(env), timeout=timeout, cwd=cwd)
    if check is not None:
        assert p.returncode == check, f"python {args} exited {p.returncode}:\n{p.stderr}"
    return p


def statistic_csv(kernels, titles, cells):
    """A statistic.csv of input 0 and output 0 of each full name in `kernels` (shape (4,4),
    timestamp 1000 + 2k): the standard columns, then `titles` with `cells(k, io)`'s text."""
    lines = ["Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
             + ",".join(titles) + "\n"]
    for k, name in enumerate(kernels):
        op_type = name.rsplit("/", 1)[1].split("-")[0]
        for io in ("input", "output"):
            lines.append(f"{op_type},{name.replace('/', '_')},0,0,{1000 + 2 * k},{io},0,64,"
                         f"float32,\"(4,4)\",{cells(k, io)}\n")
    return "".join(lines)


def marked_line(script, marker):
    """The number of the line of `script` that carries the comment `# line: {marker}`."""
    with open(script) as f:
        for number, text in enumerate(f, 1):
            if f"# line: {marker}" in text:
                return number
    raise AssertionError(f"{script} has no line marked {marker!r}")


def write_config(path, dump_path, common=None, e2e=None):
    """A data_dump.json with every kernel of every iteration, tensors, overridden by `common`
    and `e2e` (the end-to-end tests' writer); returns its path."""
    return str(gdtest.write_config(str(path), str(dump_path), common, e2e))


def every_npy_loads(root):
    """Loads every .npy under root (as a user would); returns how many there are."""
    files = glob.glob(os.path.join(str(root), "**", "*.npy"), recursive=True)
    for f in files:
        np.load(f)
    leftovers = [f for f in glob.glob(os.path.join(str(root), "**", "*"), recursive=True)
                 if ".tmp" in os.path.basename(f)]
    assert not leftovers, f"temporary files left under final names' directory: {leftovers}"
    return len(files)


def execution_order(rank_dir, graph=0):
    path = os.path.join(str(rank_dir), "execution_order", f"ms_execution_order_graph_{graph}.csv")
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0] == "NodeExecutionOrder-FullNameWithScope"
    return lines[1:]


def global_order(rank_dir, graph=0):
    path = os.path.join(str(rank_dir), "execution_order",
                        f"ms_global_execution_order_graph_{graph}.csv")
    with open(path) as f:
        return [int(line) for line in f.read().split()]


@pytest.fixture(scope="session")
def user_train():
    return os.path.join(HERE, "user_train.py")
