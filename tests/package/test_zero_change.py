"""`graphdump python` on a user's own training script (user_train.py: its own module, a custom
loss, a DataLoader over 5 batches, StepLR, gradient clipping, AdamW), run unchanged."""
import csv
import glob
import os

import numpy as np
import pytest

from conftest import (every_npy_loads, execution_order, global_order, graphdump, python,
                      write_config)

STEPS = 10  # user_train.py's default: 2 epochs of 5 batches
ALL_STATISTICS = ["max", "min", "avg", "count", "negative zero count", "positive zero count",
                  "nan count", "negative inf count", "positive inf count", "zero count", "md5",
                  "l2norm"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, user_train):
    """The script run plain, in eager PyTorch (PYTORCH_JIT=0), and under graphdump python with
    every kernel dumped (tensors and statistics)."""
    tmp = tmp_path_factory.mktemp("zero_change")
    python(user_train, tmp / "plain.npz", check=0)
    python(user_train, tmp / "eager.npz", env={"PYTORCH_JIT": "0"}, check=0)
    config = write_config(tmp / "dump.json", tmp / "dump",
                          {"saved_data": "full", "statistic_category": ALL_STATISTICS})
    run = graphdump("python", "--config", config, user_train, tmp / "dumped.npz", check=0)
    return {"tmp": tmp, "run": run, "rank": tmp / "dump" / "rank_0",
            "plain": np.load(tmp / "plain.npz"), "eager": np.load(tmp / "eager.npz"),
            "dumped": np.load(tmp / "dumped.npz")}


def test_training_computes_what_eager_pytorch_computes(runs):
    # The executor runs the same ATen kernels with eager autograd: bit for bit what the model
    # computes without torch.jit.
    for key in runs["eager"].files:
        assert np.array_equal(runs["dumped"][key], runs["eager"][key]), key


def test_training_matches_plain_torchscript_within_rounding(runs):
    # TorchScript's own executor differentiates its graph symbolically from the second call
    # (DifferentiableGraph), rounding some gradients differently in the last bit; over 10 AdamW
    # steps that stays below 1e-6 (docs/python.md, "Numbers").
    assert "trained 10 steps" in runs["run"].stdout
    for key in runs["plain"].files:
        np.testing.assert_allclose(runs["dumped"][key], runs["plain"][key], rtol=1e-5,
                                   atol=1e-6, err_msg=key)


def test_one_iteration_per_optimizer_step(runs):
    rank = runs["rank"]
    iterations = sorted(int(d) for d in os.listdir(rank / "Net" / "0") if d.isdigit())
    assert iterations == list(range(STEPS))
    assert global_order(rank) == list(range(STEPS))
    assert f"{STEPS} optimizer step(s)" in runs["run"].stderr
    assert f"{STEPS} module call(s)" in runs["run"].stderr
    assert every_npy_loads(rank) > 0


def test_forward_backward_and_optimizer_kernels_in_files_and_order(runs):
    rank = runs["rank"]
    order = execution_order(rank)
    assert order[0] == "Default/features-Sequential/0-Linear/linear-op0"
    backward = [k for k in order if k.startswith("Gradients/")]
    updates = [k for k in order if k.startswith("Default/optimizer-AdamW/")]
    assert any("/TanhBackward0-op" in k for k in backward), backward
    assert any(k.startswith("Gradients/Default/norm-LayerNorm/") for k in backward), backward
    assert {k.split("/")[2] for k in updates} == {
        "features_0_weight", "features_0_bias", "features_2_weight", "features_2_bias",
        "head_weight", "head_bias", "norm_weight", "norm_bias"}
    files = os.listdir(rank / "Net" / "0" / "3")
    for kernel in ("linear.Default_features-Sequential_0-Linear_linear-op0",
                   "TanhBackward0.Gradients_Default_TanhBackward0",
                   "AdamW.Default_optimizer-AdamW_head_weight_AdamW-op"):
        assert any(f.startswith(kernel) for f in files), kernel


def _one(pattern):
    found = glob.glob(pattern)
    assert len(found) == 1, (pattern, found)
    return np.load(found[0])


def test_optimizer_kernel_is_the_update_between_iterations(runs):
    # Input 0 is the parameter before the step (the iteration's Parameter file), output 0 the
    # parameter after it (the next iteration's Parameter file); the state tensors follow.
    base = runs["rank"] / "Net" / "0"
    for it in (0, 4, 8):
        kernel = f"{base}/{it}/AdamW.Default_optimizer-AdamW_head_weight_AdamW-op*"
        before = _one(f"{kernel}.input.0.*.npy")
        after = _one(f"{kernel}.output.0.*.npy")
        assert np.array_equal(before, _one(f"{base}/{it}/Parameter.head_weight.*.npy"))
        assert np.array_equal(after, _one(f"{base}/{it + 1}/Parameter.head_weight.*.npy"))
        assert not np.array_equal(before, after)
        # AdamW's state: step, exp_avg, exp_avg_sq after the step.
        assert len(glob.glob(f"{kernel}.output.*.npy")) == 4
    # The last parameters are the script's own final ones.
    last = _one(f"{base}/{STEPS - 1}/AdamW.Default_optimizer-AdamW_head_weight_AdamW-op*"
                ".output.0.*.npy")
    assert np.array_equal(last, runs["dumped"]["head.weight"])


def test_gradient_inputs_of_updates_are_clipped(runs):
    # clip_grad_norm_(max_norm=1) runs between backward and step: the update kernels' gradient
    # inputs are the clipped gradients, whose total norm is at most 1.
    base = runs["rank"] / "Net" / "0" / "2"
    grads = [np.load(f) for f in glob.glob(f"{base}/AdamW.*.input.1.*.npy")]
    assert len(grads) == 8
    assert np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads)) <= 1.0 + 1e-5


def _numpy_statistics(a):
    x = a.astype(np.float64).ravel()
    return {"Max Value": x.max(), "Min Value": x.min(), "Avg Value": x.mean(),
            "Count": x.size, "Negative Zero Count": int((x < 0).sum()),
            "Positive Zero Count": int((x > 0).sum()), "NaN Count": int(np.isnan(x).sum()),
            "Zero Count": int((x == 0).sum()), "L2Norm Value": np.sqrt((x ** 2).sum())}


def test_statistics_match_numpy(runs):
    directory = runs["rank"] / "Net" / "0" / "1"
    with open(directory / "statistic.csv", newline="") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    assert header[:10] == ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO",
                           "Slot", "Data Size", "Data Type", "Shape"]
    checked = 0
    for row in rows:
        values = dict(zip(header, row))
        pattern = (f"{directory}/{values['Op Type']}.{values['Op Name']}.0.0."
                   f"{values['Timestamp']}.{values['IO']}.{values['Slot']}.*.npy")
        matches = glob.glob(pattern)
        assert len(matches) == 1, pattern
        a = np.load(matches[0])
        for column, expected in _numpy_statistics(a).items():
            got = float(values[column])
            assert got == pytest.approx(expected, rel=1e-5, abs=1e-30), (matches[0], column)
        checked += 1
    assert checked == len(rows) > 50
