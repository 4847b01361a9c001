"""Precision runs (docs/precision.md): `run --precision bf16` feeds a float32 .npy to a bfloat16
model under the float32 run's kernel names; `--keep-fp32` computes the chosen kernel in float32
(its dumped output equals float32 arithmetic on its dumped inputs, bit for bit) and hands the
next kernel bfloat16; `train --precision bf16` trains; bad flags are usage errors naming them."""
import os

import numpy as np
import torch

import gdmodels
import gdtest as t
import precision_fixture as p

work = t.temp_dir()
try:
    fp32, _, _ = p.dump_run(work, "fp32", "dot_net", ["dot_x.npy"])
    out_bf16 = os.path.join(work, "out_bf16.npy")
    bf16, out, _ = p.dump_run(work, "bf16", "dot_net", ["dot_x.npy"], "--precision", "bf16",
                              "--save-output", out_bf16)
    names = p.kernel_names(fp32)
    t.expect_eq(p.kernel_names(bf16), names, "a bf16 run's kernels are named as the fp32 run's")
    t.expect("BFloat16" in out, f"the step prints a bfloat16 output: {out}")

    # The model, its parameters and its float32 input are cast; the result equals the eager
    # module cast with .to(torch.bfloat16) on the input cast the same way.
    x = np.load(p.data("dot_x.npy"))
    module = torch.jit.load(p.model("dot_net")).to(torch.bfloat16)
    with torch.no_grad():
        expected = module(torch.from_numpy(x).bfloat16()).float().numpy()
    saved = np.load(out_bf16)
    t.expect_eq(saved.dtype, np.float32, "--save-output writes bfloat16 widened to float32")
    t.expect(np.array_equal(saved, expected), f"bf16 output {saved} == eager bf16 {expected}")

    dot = p.find(names, "dot")
    linear = p.find(names, "linear")
    mul = p.find(names, "mul")
    linear_in = p.tensor_file(bf16, linear, "input", 0)
    t.expect_eq(p.dtype_of(linear_in), "bfloat16", "the graph input is cast to bfloat16")
    t.expect(np.array_equal(np.load(linear_in), torch.from_numpy(x).bfloat16().float().numpy()),
             "the dumped graph input holds the float32 input rounded to bfloat16")
    t.expect_eq(p.dtype_of(p.tensor_file(bf16, linear, "input", 1)), "bfloat16",
                "parameters are cast to bfloat16")

    # --keep-fp32 dot: the dot computes in float32 on its inputs cast up.
    keep, _, _ = p.dump_run(work, "keep", "dot_net", ["dot_x.npy"], "--precision", "bf16",
                            "--keep-fp32", dot)
    t.expect_eq(p.kernel_names(keep), names, "--keep-fp32 renames nothing")
    h = p.load(keep, dot, "input", 0)
    w = p.load(keep, dot, "input", 1)
    s = p.load(keep, dot, "output", 0)
    t.expect_eq([p.dtype_of(p.tensor_file(keep, dot, io, i)) for io, i in
                 (("input", 0), ("input", 1), ("output", 0))], ["float32"] * 3,
                "a kept kernel computes on float32 inputs and keeps a float32 output")
    t.expect(np.array_equal(h, torch.from_numpy(h).bfloat16().float().numpy()),
             "its float32 inputs hold bfloat16 values (cast up exactly)")
    t.expect(np.array_equal(s, torch.dot(torch.from_numpy(h), torch.from_numpy(w)).numpy()),
             "the kept dot's output is float32 arithmetic on its inputs, bit for bit")
    t.expect_eq(p.dtype_of(p.tensor_file(keep, mul, "input", 0)), "bfloat16",
                "the next kernel, not kept, reads the float32 result cast to bfloat16")
    t.expect(np.array_equal(p.load(keep, mul, "input", 0),
                            torch.from_numpy(s).bfloat16().float().numpy()),
             "... rounded from the kept kernel's float32 output")
    ref = p.load(fp32, dot, "output", 0)
    kept_err = p.norm_rel(s, ref)
    plain_err = p.norm_rel(p.load(bf16, dot, "output", 0), ref)
    t.expect(kept_err < 0.01 and plain_err > 0.1,
             f"dot error against fp32: {kept_err} kept, {plain_err} in bfloat16")
    final_keep = p.norm_rel(p.load(keep, p.find(names, "tanh"), "output", 0),
                            p.load(fp32, p.find(names, "tanh"), "output", 0))
    t.expect(final_keep < 0.02, f"keeping the dot fixes the model's output: {final_keep}")

    # Bad flags: exit 2 and a message naming the option, what was given and what is allowed.
    code, _, err = t.run("run", p.model("dot_net"), "--input", p.data("dot_x.npy"),
                         "--precision", "bf16", "--keep-fp32", "nosuchop")
    t.expect(code == 2 and "--keep-fp32 'nosuchop' selects no kernel" in err
             and "--list-kernels" in err, f"unknown --keep-fp32 entry: {code} {err}")
    code, _, err = t.run("run", p.model("dot_net"), "--input", p.data("dot_x.npy"),
                         "--keep-fp32", "dot")
    t.expect(code == 2 and "--keep-fp32" in err and "--precision bf16 or fp16" in err,
             f"--keep-fp32 without --precision: {code} {err}")
    code, _, err = t.run("run", p.model("dot_net"), "--precision", "fp8")
    t.expect(code == 2 and "--precision" in err and "bf16" in err and "fp16" in err,
             f"--precision fp8: {code} {err}")
    code, _, err = t.run("run", p.model("dot_net"), "--input", p.data("dot_x.npy"),
                         "--precision", "bf16", "--keep-fp32", "name-regex(dot")
    t.expect(code == 2 and "name-regex(" in err, f"malformed regex entry: {code} {err}")

    # Training in bfloat16: parameters and gradients are bfloat16, the loss is finite.
    dump = os.path.join(work, "train")
    cfg = t.write_config(os.path.join(work, "train.json"), dump, {"iteration": "0"})
    code, out, err = t.run("train", gdmodels.model_path("mlp"), "--steps", "2", "--input-shape",
                           "4x12", "--classes", "3", "--precision", "bf16", "--keep-fp32",
                           "relu", "--config", cfg, env=p.ONE_THREAD)
    t.expect_eq(code, 0, f"train --precision bf16: {err[-500:]}")
    params = t.files(os.path.join(dump, "**", "Parameter.*.npy"))
    t.expect(params and all(p.dtype_of(f) == "bfloat16" for f in params),
             f"parameters are bfloat16: {[os.path.basename(f) for f in params][:3]}")
    losses = [float(line.split("loss ")[1].split()[0]) for line in out.splitlines()
              if "loss " in line]
    t.expect(len(losses) == 2 and all(np.isfinite(losses)), f"finite losses: {out}")
finally:
    t.cleanup(work)
t.finish()
