"""Shared set-up of the precision-debugging tests: the models of precision_models.py, made once
into BUILD_DIR/test_models/precision (a lock keeps parallel tests from racing), and helpers to
run and dump them."""
import fcntl
import glob
import os
import subprocess

import numpy as np

import gdtest as t

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS_DIR = os.path.join(t.BUILD_DIR, "test_models", "precision")
SCRIPT = os.path.join(HERE, "precision_models.py")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def models_dir():
    """The directory holding the models and inputs, made when missing or older than the script."""
    os.makedirs(MODELS_DIR, exist_ok=True)
    marker = os.path.join(MODELS_DIR, "var_x.npy")
    with open(os.path.join(MODELS_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(marker) or os.path.getmtime(marker) < os.path.getmtime(SCRIPT):
            subprocess.run([t.PYTHON, SCRIPT, MODELS_DIR], check=True,
                           capture_output=True)
    return MODELS_DIR


def model(name):
    return os.path.join(models_dir(), name + ".pt")


def data(name):
    return os.path.join(models_dir(), name)


def source_line(marker):
    """1-based line of precision_models.py holding `marker`."""
    with open(SCRIPT) as f:
        for number, line in enumerate(f, 1):
            if marker in line:
                return number
    raise AssertionError(marker)


def dump_run(work, name, model_name, inputs, *extra, check=0):
    """Runs MODEL with a configuration dumping every kernel's inputs and outputs into
    work/name; returns (dump root's rank_0 directory, stdout, stderr)."""
    dump = os.path.join(work, name)
    cfg = t.write_config(os.path.join(work, name + ".json"), dump, {"net_name": "Net"})
    args = ["run", model(model_name)]
    for i in inputs:
        args += ["--input", data(i)]
    code, out, err = t.run(*args, "--config", cfg, *extra, env=ONE_THREAD)
    if check is not None and code != check:
        raise AssertionError(f"run {model_name} {extra} exited {code}:\n{out}\n{err}")
    return os.path.join(dump, "rank_0"), out, err


def kernel_names(rank_dir):
    path = os.path.join(rank_dir, "execution_order", "ms_execution_order_graph_0.csv")
    with open(path) as f:
        return [line.strip() for line in f.readlines()[1:] if line.strip()]


def tensor_file(rank_dir, full_name, io, slot, iteration=0):
    """The .npy of (kernel, io, slot) in an iteration; None when absent."""
    stem = full_name.replace("/", "_").replace(".", "_")
    found = glob.glob(os.path.join(rank_dir, "Net", "0", str(iteration),
                                   f"*.{stem}.*.{io}.{slot}.*.npy"))
    return found[0] if found else None


def load(rank_dir, full_name, io, slot):
    path = tensor_file(rank_dir, full_name, io, slot)
    return None if path is None else np.load(path)


def dtype_of(path):
    """The dtype a dump file's name gives ("bfloat16")."""
    return os.path.basename(path).split(".")[-2]


def norm_rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def find(names, op_type):
    """The full name of the kernel whose op type is `op_type` (its last segment)."""
    hits = [n for n in names if n.rsplit("/", 1)[-1].rsplit("-op", 1)[0] == op_type]
    if len(hits) != 1:
        raise AssertionError(f"{op_type}: {hits} in {names}")
    return hits[0]
