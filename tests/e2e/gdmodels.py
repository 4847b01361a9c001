"""Test models for the end-to-end tests of run/train: made by examples/make_models.py into
BUILD_DIR/test_models on first use (a lock file keeps parallel tests from racing)."""
import fcntl
import os
import subprocess
import sys

import gdtest

MODELS_DIR = os.path.join(gdtest.BUILD_DIR, "test_models")
sys.path.insert(0, os.path.join(gdtest.SOURCE_DIR, "examples"))
import make_models  # noqa: E402  (eager constructors for Python references)


def model_path(name):
    """Path of NAME.pt, generated when missing."""
    os.makedirs(MODELS_DIR, exist_ok=True)
    path = os.path.join(MODELS_DIR, name + ".pt")
    script = os.path.join(gdtest.SOURCE_DIR, "examples", "make_models.py")
    with open(os.path.join(MODELS_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(script):
            subprocess.run([gdtest.PYTHON, script, MODELS_DIR, name], check=True,
                           capture_output=True)
    return path


def source_line(marker, path=None):
    """1-based line number of the first line of make_models.py containing `marker`."""
    path = path or os.path.join(gdtest.SOURCE_DIR, "examples", "make_models.py")
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if marker in line:
                return number
    raise AssertionError(f"{marker!r} not in {path}")


def eager_with_weights(name):
    """The eager module of NAME with the weights of NAME.pt (the same .pt graphdump ran)."""
    import torch
    module = make_models.eager(name)
    module.load_state_dict(torch.jit.load(model_path(name)).state_dict())
    return module


def scope_prefix(module, path):
    """File-name prefix of the kernels of the module at `path` ("features.0" ->
    "Default_features-Sequential_0-Conv2d_")."""
    parts = ["Default"]
    current = module
    for attr in path.split("."):
        current = getattr(current, attr)
        parts.append(f"{attr}-{type(current).__name__}")
    return "_".join(parts) + "_"


def env_one_thread():
    return {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
