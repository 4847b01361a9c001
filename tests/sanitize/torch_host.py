"""The LibTorch host (executor, trainer, distributed) under AddressSanitizer and
UndefinedBehaviorSanitizer: one small `run`, one `train` with an asynchronous full dump, and a
two-rank `train --nproc 2`, each by the sanitized graphdump-torch. Any sanitizer report ends the
process with an error; the dumped values are checked against PyTorch's own.

Environment: GRAPHDUMP_TORCH_BIN (the sanitized graphdump-torch), GRAPHDUMP_SOURCE_DIR,
GRAPHDUMP_BUILD_DIR (where the test models are made).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

SOURCE = os.environ["GRAPHDUMP_SOURCE_DIR"]
BINARY = os.environ["GRAPHDUMP_TORCH_BIN"]
MODELS = os.path.join(os.environ["GRAPHDUMP_BUILD_DIR"], "test_models")
failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message, file=sys.stderr)


def graphdump(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"):
        env.pop(key, None)
    p = subprocess.run([BINARY, *args], capture_output=True, text=True, env=env, timeout=900)
    sanitizer = [line for line in p.stderr.splitlines() if "Sanitizer" in line or
                 "runtime error:" in line]
    expect(not sanitizer, f"{args[0]}: no sanitizer report: {sanitizer[:5]}")
    expect(p.returncode == 0, f"{args[0]} exits 0: {p.returncode}\n{p.stderr[-2000:]}")
    return p


def config(work, name, dump, enable):
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump({"common_dump_settings": {
            "dump_mode": 0, "path": dump, "net_name": "Net", "iteration": "all",
            "saved_data": "full", "input_output": 0, "kernels": [], "support_device": [0, 1]},
            "e2e_dump_settings": {"enable": enable}}, f)
    return path


def main():
    subprocess.run([sys.executable, os.path.join(SOURCE, "examples", "make_models.py"), MODELS,
                    "mlp", "small_cnn"], check=True, capture_output=True)
    work = tempfile.mkdtemp(prefix="graphdump_sanitize_")
    try:
        # run: the executor, synchronous dump; the last kernel's output is the model's output.
        x = np.random.default_rng(3).standard_normal((2, 12)).astype(np.float32)
        np.save(os.path.join(work, "x.npy"), x)
        dump = os.path.join(work, "run")
        graphdump("run", os.path.join(MODELS, "mlp.pt"), "--input", os.path.join(work, "x.npy"),
                  "--config", config(work, "run", dump, True))
        [out] = glob.glob(os.path.join(dump, "rank_0", "Net", "0", "0",
                                       "linear.*fc2*.output.0.DefaultFormat.float32.npy"))
        expected = torch.jit.load(os.path.join(MODELS, "mlp.pt"))(torch.from_numpy(x)).detach()
        expect(np.allclose(np.load(out), expected.numpy(), rtol=1e-5, atol=1e-6),
               "run: the dumped output is the model's output")

        # train: autograd hooks, the optimizer, the asynchronous writers.
        dump = os.path.join(work, "train")
        graphdump("train", os.path.join(MODELS, "small_cnn.pt"), "--steps", "2",
                  "--input-shape", "4x3x16x16", "--classes", "5",
                  "--config", config(work, "train", dump, False))
        files = glob.glob(os.path.join(dump, "rank_0", "Net", "0", "1", "*.npy"))
        expect(any("Gradients" in f for f in files), "train: backward kernels are dumped")
        for f in files:
            np.load(f)
        expect(not os.path.exists(os.path.join(dump, "rank_0", ".dump_metadata", "INCOMPLETE")),
               "train: the dump is complete")

        # distributed: two ranks (gloo) through the launcher.
        dump = os.path.join(work, "ranks")
        graphdump("train", os.path.join(MODELS, "small_cnn.pt"), "--steps", "2", "--nproc", "2",
                  "--input-shape", "4x3x16x16", "--classes", "5",
                  "--config", config(work, "ranks", dump, False))
        for rank in (0, 1):
            weights = sorted(glob.glob(os.path.join(dump, f"rank_{rank}", "Net", "0", "1",
                                                    "Parameter.*weight*.npy")))
            expect(weights, f"rank {rank} dumped its parameters")
        a = [np.load(f) for f in sorted(glob.glob(os.path.join(dump, "rank_0", "Net", "0", "1",
                                                                "Parameter.*.npy")))]
        b = [np.load(f) for f in sorted(glob.glob(os.path.join(dump, "rank_1", "Net", "0", "1",
                                                                "Parameter.*.npy")))]
        expect(len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b)),
               "the ranks hold the same weights after an all-reduced step")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


main()
