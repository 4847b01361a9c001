"""The .ir of a scripted model names the right source line for a known kernel, and traced models
get their user frames; `--list-kernels` shows the same lines; bad inputs are clear errors."""
import os
import re
import sys

import numpy as np
import pytest

import gdmodels
import gdtest


def ir_entry(ir, full_name):
    """The lines of the .ir entry whose full name is `full_name`."""
    lines = ir.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"# Fullname with scope: ({full_name})":
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("# In file"):
                j += 1
            return lines[i - 2:j]
    return []


def test_scripted_ir_names_source_lines(module_scratch):
    cfg = gdtest.write_config(os.path.join(module_scratch, "d.json"),
                              os.path.join(module_scratch, "dump"))
    gdtest.run("run", gdmodels.model_path("ifloop"), "--input-shape", "2x8", "--config", cfg,
               check=0)
    ir = open(os.path.join(module_scratch, "dump", "rank_0", "graphs",
                           "ms_output_trace_code_graph_0.ir")).read()
    relu_line = gdmodels.source_line("h = torch.relu(h)")
    entry = ir_entry(ir, "Default/relu-op3")
    assert any(re.search(rf"# In file .*make_models\.py\({relu_line}\)/\s*h = torch\.relu\(h\)/", l)
               for l in entry), f"relu-op3 names make_models.py({relu_line}):\n" + "\n".join(entry)
    block_line = gdmodels.source_line("h = self.block(h) + h * 0.5")
    entry = ir_entry(ir, "Default/block-Sequential/0-Linear/linear-op5")
    assert (len(entry) >= 5 and "linear.py" in entry[3] and
            f"make_models.py({block_line})" in entry[-1]), (
        "the linear inside block names linear.py first and the call site last:\n" +
        "\n".join(entry))
    assert "(<Tensor[float32], (2, 8)>, <Tensor[float32], (16, 8)>" in ir, (
        "inputs carry dtype and shape")


def test_configuration_from_the_environment(module_scratch):
    # The configuration from the environment (docs/configuration.md) instead of --config.
    env_dump = os.path.join(module_scratch, "envdump")
    env_cfg = gdtest.write_config(os.path.join(module_scratch, "env.json"), env_dump)
    _, out, _ = gdtest.run("run", gdmodels.model_path("mlp"), "--input-shape", "2x12",
                           env={"MINDSPORE_DUMP_CONFIG": env_cfg}, check=0)
    assert (f"dump: {env_dump}/rank_0" in out and
            os.path.isdir(os.path.join(env_dump, "rank_0", "Net", "0", "0"))), (
        f"MINDSPORE_DUMP_CONFIG enables the dump:\n{out}")


def test_traced_model_points_at_user_frames():
    _, out, _ = gdtest.run("run", gdmodels.model_path("traced_mlp"), "--list-kernels", check=0)
    assert re.search(r"Default/fc1-Linear/linear-op0\tfc1\t.*make_models\.py:\d+", out), (
        f"traced kernels point at make_models.py:\n{out}")


def test_bad_inputs_are_clear_errors(module_scratch):
    # Errors: missing model, not an archive, bad npy, wrong arity.
    code, _, err = gdtest.run("run", os.path.join(module_scratch, "missing.pt"))
    assert code == 2 and "missing.pt does not exist" in err, f"missing model: {code} {err}"
    bad = os.path.join(module_scratch, "bad.pt")
    open(bad, "w").write("not a zip")
    code, _, err = gdtest.run("run", bad)
    assert code == 2 and "not a TorchScript archive" in err, f"bad model: {code} {err}"
    badnpy = os.path.join(module_scratch, "bad.npy")
    open(badnpy, "wb").write(b"\x93NUMPY\x01\x00garbage")
    code, _, err = gdtest.run("run", gdmodels.model_path("mlp"), "--input", badnpy)
    assert code == 2 and "bad.npy" in err, f"bad npy: {code} {err}"
    x = os.path.join(module_scratch, "x.npy")
    np.save(x, np.zeros((2, 12), np.float32))
    code, _, err = gdtest.run("run", gdmodels.model_path("mlp"), "--input", x, "--input", x)
    assert code == 2 and "takes 1 input" in err, f"wrong arity: {code} {err}"
    code, _, err = gdtest.run("train", gdmodels.model_path("mlp"), "--input-shape", "2x12",
                              "--classes", "3", "--optimizer", "rmsprop")
    assert code == 2 and "rmsprop" in err, f"unknown optimizer: {code} {err}"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
