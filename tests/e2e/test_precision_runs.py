"""Precision runs (docs/precision.md): `run --precision bf16` feeds a float32 .npy to a bfloat16
model under the float32 run's kernel names; `--keep-fp32` computes the chosen kernel in float32
(its dumped output equals float32 arithmetic on its dumped inputs, bit for bit) and hands the
next kernel bfloat16; `train --precision bf16` trains; bad flags are usage errors naming them."""
import os
import sys

import numpy as np
import pytest
import torch

import gdmodels
import gdtest as t
import precision_fixture as p


@pytest.fixture(scope="module")
def runs(module_scratch):
    """The fp32 and bf16 runs of sum_net: (fp32 dump, bf16 dump, the bf16 run's output,
    its --save-output file, the fp32 run's kernel names)."""
    fp32, _, _ = p.dump_run(module_scratch, "fp32", "sum_net", ["sum_x.npy"])
    out_bf16 = os.path.join(module_scratch, "out_bf16.npy")
    bf16, out, _ = p.dump_run(module_scratch, "bf16", "sum_net", ["sum_x.npy"],
                              "--precision", "bf16", "--save-output", out_bf16)
    names = p.kernel_names(fp32)
    return fp32, bf16, out, out_bf16, names


def test_bf16_run_is_named_and_computed_as_eager_bf16(runs):
    fp32, bf16, out, out_bf16, names = runs
    assert p.kernel_names(bf16) == names, "a bf16 run's kernels are named as the fp32 run's"
    assert "BFloat16" in out, f"the step prints a bfloat16 output: {out}"

    # The model, its parameters and its float32 input are cast; the result equals the eager
    # module cast with .to(torch.bfloat16) on the input cast the same way.
    x = np.load(p.data("sum_x.npy"))
    module = torch.jit.load(p.model("sum_net")).to(torch.bfloat16)
    with torch.no_grad():
        expected = module(torch.from_numpy(x).bfloat16()).float().numpy()
    saved = np.load(out_bf16)
    assert saved.dtype == np.float32, "--save-output writes bfloat16 widened to float32"
    assert np.array_equal(saved, expected), f"bf16 output {saved} == eager bf16 {expected}"

    linear = p.find(names, "linear")
    linear_in = p.tensor_file(bf16, linear, "input", 0)
    assert p.dtype_of(linear_in) == "bfloat16", "the graph input is cast to bfloat16"
    assert np.array_equal(np.load(linear_in), torch.from_numpy(x).bfloat16().float().numpy()), (
        "the dumped graph input holds the float32 input rounded to bfloat16")
    assert p.dtype_of(p.tensor_file(bf16, linear, "input", 1)) == "bfloat16", (
        "parameters are cast to bfloat16")


def test_keep_fp32_computes_the_kept_kernel_in_float32(module_scratch, runs):
    fp32, bf16, _, _, names = runs
    add = p.find(names, "index_add")
    mul = p.find(names, "mul")
    # --keep-fp32 index_add: the sum computes in float32 on its inputs cast up.
    keep, _, _ = p.dump_run(module_scratch, "keep", "sum_net", ["sum_x.npy"], "--precision",
                            "bf16", "--keep-fp32", add)
    assert p.kernel_names(keep) == names, "--keep-fp32 renames nothing"
    total, index, h = (p.load(keep, add, "input", i) for i in range(3))
    s = p.load(keep, add, "output", 0)
    assert ([p.dtype_of(p.tensor_file(keep, add, io, i)) for io, i in
             (("input", 0), ("input", 1), ("input", 2), ("output", 0))]
            == ["float32", "int64", "float32", "float32"]), (
        "a kept kernel computes on float32 inputs (its index stays int64) and keeps a float32 "
        "output")
    assert np.array_equal(h, torch.from_numpy(h).bfloat16().float().numpy()), (
        "its float32 inputs hold bfloat16 values (cast up exactly)")
    expected = torch.from_numpy(total).index_add(0, torch.from_numpy(index), torch.from_numpy(h))
    assert np.array_equal(s, expected.numpy()), (
        "the kept index_add's output is float32 arithmetic on its inputs, bit for bit")
    assert p.dtype_of(p.tensor_file(keep, mul, "input", 0)) == "bfloat16", (
        "the next kernel, not kept, reads the float32 result cast to bfloat16")
    assert (np.array_equal(p.load(keep, mul, "input", 0),
                           torch.from_numpy(s).bfloat16().float().numpy())), (
        "... rounded from the kept kernel's float32 output")
    ref = p.load(fp32, add, "output", 0)
    kept_err = p.norm_rel(s, ref)
    plain_err = p.norm_rel(p.load(bf16, add, "output", 0), ref)
    assert kept_err < 0.01 and plain_err > 0.1, (
        f"index_add error against fp32: {kept_err} kept, {plain_err} in bfloat16")
    final_keep = p.norm_rel(p.load(keep, p.find(names, "tanh"), "output", 0),
                            p.load(fp32, p.find(names, "tanh"), "output", 0))
    assert final_keep < 0.02, f"keeping the sum fixes the model's output: {final_keep}"


def test_bad_flags_are_usage_errors():
    # Bad flags: exit 2 and a message naming the option, what was given and what is allowed.
    code, _, err = t.run("run", p.model("sum_net"), "--input", p.data("sum_x.npy"),
                         "--precision", "bf16", "--keep-fp32", "nosuchop")
    assert (code == 2 and "--keep-fp32 'nosuchop' selects no kernel" in err
            and "--list-kernels" in err), (
        f"unknown --keep-fp32 entry: {code} {err}")
    code, _, err = t.run("run", p.model("sum_net"), "--input", p.data("sum_x.npy"),
                         "--keep-fp32", "index_add")
    assert code == 2 and "--keep-fp32" in err and "--precision bf16 or fp16" in err, (
        f"--keep-fp32 without --precision: {code} {err}")
    code, _, err = t.run("run", p.model("sum_net"), "--precision", "fp8")
    assert code == 2 and "--precision" in err and "bf16" in err and "fp16" in err, (
        f"--precision fp8: {code} {err}")
    code, _, err = t.run("run", p.model("sum_net"), "--input", p.data("sum_x.npy"),
                         "--precision", "bf16", "--keep-fp32", "name-regex(index_add")
    assert code == 2 and "name-regex(" in err, f"malformed regex entry: {code} {err}"


def test_train_in_bf16(module_scratch):
    # Training in bfloat16: parameters and gradients are bfloat16, the loss is finite.
    dump = os.path.join(module_scratch, "train")
    cfg = t.write_config(os.path.join(module_scratch, "train.json"), dump, {"iteration": "0"})
    code, out, err = t.run("train", gdmodels.model_path("mlp"), "--steps", "2", "--input-shape",
                           "4x12", "--classes", "3", "--precision", "bf16", "--keep-fp32",
                           "relu", "--config", cfg, env=p.ONE_THREAD)
    assert code == 0, f"train --precision bf16: {err[-500:]}"
    params = t.files(os.path.join(dump, "**", "Parameter.*.npy"))
    assert params and all(p.dtype_of(f) == "bfloat16" for f in params), (
        f"parameters are bfloat16: {[os.path.basename(f) for f in params][:3]}")
    losses = [float(line.split("loss ")[1].split()[0]) for line in out.splitlines()
              if "loss " in line]
    assert len(losses) == 2 and all(np.isfinite(losses)), f"finite losses: {out}"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
