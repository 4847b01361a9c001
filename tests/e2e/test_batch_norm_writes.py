"""Batch norm updates its running statistics in place without saying so in its schema, and
without bumping their version counters. Training resnet18 with the batch_norm kernels dumped:
- a kernel's running_mean input is the value before the kernel ran (the iteration's Parameter
  file), in synchronous and in asynchronous mode (where tensors are written without a copy);
- a statistic dump's rows of the running statistics are those of their bytes (no statistic
  of the old values is reused for the new ones)."""
import csv
import glob
import os

import numpy as np
import pytest

import gdmodels
import gdtest

STEPS = 3


def train(tmp, name, common, e2e):
    config = gdtest.write_config(os.path.join(tmp, name + ".json"), os.path.join(tmp, name),
                                 dict({"dump_mode": 1, "kernels": ["batch_norm"]}, **common), e2e)
    gdtest.run("train", gdmodels.model_path("resnet18"), "--steps", STEPS, "--input-shape",
               "2x3x32x32", "--config", config, env=gdmodels.env_one_thread(), check=0)
    return os.path.join(tmp, name, "rank_0", "Net", "0")


def one(pattern):
    found = glob.glob(pattern)
    assert len(found) == 1, (pattern, found)
    return np.load(found[0])


def statistic_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {(r["Op Name"], r["IO"], r["Slot"]): r for r in rows}


@pytest.mark.parametrize("mode, e2e", [("sync", {"enable": True}), ("async", {"enable": False})])
def test_running_mean_input_is_the_value_before_the_kernel(scratch, mode, e2e):
    base = train(scratch, mode, {"saved_data": "tensor"}, e2e)
    for it in range(1, STEPS):
        start = one(f"{base}/{it}/Parameter.bn1_running_mean.*.npy")
        before = one(f"{base}/{it}/batch_norm.Default_bn1-BatchNorm2d_batch_norm-op*"
                     ".input.3.*.npy")
        following = one(f"{base}/{it + 1}/Parameter.bn1_running_mean.*.npy") \
            if it + 1 < STEPS else None
        assert np.array_equal(before, start), \
            (f"{mode} iteration {it}: bn1's running_mean input is its value before "
             f"the kernel (max diff {np.abs(before - start).max()})")
        if following is not None:
            assert not np.array_equal(start, following), \
                f"{mode} iteration {it}: the kernel updated running_mean"


def test_statistic_rows_of_running_statistics_are_those_of_their_bytes(scratch):
    # The statistic-only run's rows of the running statistics, iteration by iteration, equal
    # those a full run computes from the bytes it writes.
    statistic = train(scratch, "statistic", {"saved_data": "statistic"}, {"enable": True})
    full = train(scratch, "full", {"saved_data": "full"}, {"enable": True})
    for it in range(STEPS):
        a = statistic_rows(f"{statistic}/{it}/statistic.csv")
        b = statistic_rows(f"{full}/{it}/statistic.csv")
        for key in [k for k in b if "running_" in k[0]]:
            assert ((a[key]["Max Value"], a[key]["Min Value"], a[key]["L2Norm Value"]) ==
                    (b[key]["Max Value"], b[key]["Min Value"], b[key]["L2Norm Value"])), \
                f"iteration {it} {key}: statistic-only row equals the full row"
