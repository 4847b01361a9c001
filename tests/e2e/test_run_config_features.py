"""Every configuration feature of docs/configuration.md end to end on graphdump's executor,
checked by inspecting the files `graphdump run` / `graphdump train` write."""
import csv
import glob
import json
import os
import re
import sys

import numpy as np
import pytest
import torch

import gdmodels
import gdtest

FILE = re.compile(r"^(?P<type>[^.]+)\.(?P<name>[^.]+)\.0\.0\.(?P<ts>\d+)\.(?P<io>input|output)\."
                  r"(?P<slot>\d+)\.(?P<fmt>[^.]+)\.(?P<dtype>[^.]+)\.npy$")


def tensors(step_dir):
    """(op name, io, slot) of every kernel tensor file (parameters excluded)."""
    out = []
    for path in sorted(glob.glob(os.path.join(step_dir, "*.npy"))):
        m = FILE.match(os.path.basename(path))
        if m and m.group("type") != "Parameter":
            out.append((m.group("name"), m.group("io"), int(m.group("slot"))))
    return out


def dump_run(model, common=None, e2e=None, args=(), train=False, check=0):
    tmp = gdtest.temp_dir()
    cfg = gdtest.write_config(os.path.join(tmp, "dump.json"), os.path.join(tmp, "dump"),
                              common, e2e)
    cmd = ["train" if train else "run", gdmodels.model_path(model), "--config", cfg, *args]
    code, out, err = gdtest.run(*cmd, env=gdmodels.env_one_thread(), check=check)
    return tmp, os.path.join(tmp, "dump", "rank_0"), out + err


def step(root, it, graph=0):
    return os.path.join(root, "Net", str(graph), str(it))


MLP = ["--input-shape", "2x12"]


def test_dump_mode_and_kernel_selection():
    # dump_mode 0: every kernel; 1 with a type, a full name, a regex; 2 with --set-dump.
    cases = [
        ({"dump_mode": 0}, [], {"Default_fc1-Linear_linear-op0", "Default_act-ReLU_relu-op1",
                                "Default_fc2-Linear_linear-op2"}),
        ({"dump_mode": 1, "kernels": ["relu"]}, [], {"Default_act-ReLU_relu-op1"}),
        ({"dump_mode": 1, "kernels": ["Default/fc2-Linear/linear-op2"]}, [],
         {"Default_fc2-Linear_linear-op2"}),
        ({"dump_mode": 1, "kernels": ["name-regex(Default/fc.-Linear/.*)"]}, [],
         {"Default_fc1-Linear_linear-op0", "Default_fc2-Linear_linear-op2"}),
        ({"dump_mode": 2}, ["--set-dump", "fc2"], {"Default_fc2-Linear_linear-op2"}),
    ]
    for common, extra, expected in cases:
        tmp, root, _ = dump_run("mlp", common, args=MLP + extra)
        names = {n for n, _, _ in tensors(step(root, 0))}
        assert names == expected, f"kernels dumped with {common} {extra}"
        gdtest.cleanup(tmp)
    tmp, root, out = dump_run("mlp", {"dump_mode": 1, "kernels": ["conv2d"]}, args=MLP)
    assert out.count("unused kernel in config: conv2d") == 1, f"unused entry reported once:\n{out}"
    gdtest.cleanup(tmp)
    # Set-dump from the CLI on a module that does not exist: usage error naming it.
    tmp, root, out = dump_run("mlp", {"dump_mode": 2}, args=MLP + ["--set-dump", "fc9"], check=2)
    assert "fc9" in out and "fc1" in out, f"--set-dump error names the paths:\n{out}"
    gdtest.cleanup(tmp)


def test_iterations_and_initial_iteration():
    tmp, root, _ = dump_run("mlp", {"iteration": "1|3-4", "initial_iteration": 1},
                            args=MLP + ["--steps", "5"])
    dirs = sorted(os.listdir(os.path.join(root, "Net", "0")))
    assert [d for d in dirs if d.isdigit()] == ["1", "3", "4"], "iteration directories"
    order = open(os.path.join(root, "execution_order",
                              "ms_global_execution_order_graph_0.csv")).read().split()
    assert order == ["1", "2", "3", "4", "5"], "global execution order"
    gdtest.cleanup(tmp)


def test_input_output():
    for io, expected in ((0, {"input", "output"}), (1, {"input"}), (2, {"output"})):
        tmp, root, _ = dump_run("mlp", {"input_output": io}, args=MLP)
        got = {k for _, k, _ in tensors(step(root, 0))}
        assert got == expected, f"input_output {io}"
        gdtest.cleanup(tmp)


def test_saved_data_and_statistics():
    for saved in ("statistic", "full"):
        tmp, root, _ = dump_run("mlp", {"saved_data": saved,
                                        "statistic_category": ["max", "min", "avg", "md5"]},
                                args=MLP)
        d = step(root, 0)
        rows = open(os.path.join(d, "statistic.csv")).read().splitlines()
        assert rows[0].endswith("Max Value,Min Value,Avg Value,MD5"), (
            f"statistic.csv header: {rows[0]}")
        assert len(rows) > 6, f"{saved}: one row per tensor ({len(rows)} lines)"
        has_npy = bool(tensors(d))
        assert (has_npy) == (saved == "full"), f"saved_data {saved}: tensor files"
        if saved == "full":
            # The relu output row's max equals the file's max.
            f = [p for p in glob.glob(os.path.join(d, "relu.*.output.0.*.npy"))][0]
            row = [r for r in rows if r.startswith("relu,") and ",output,0," in r][0]
            fields = next(csv.reader([row]))
            assert abs(float(fields[10]) - float(np.load(f).max())) < 1e-4, (
                f"statistic max matches the file: {row}")
        gdtest.cleanup(tmp)


def test_overflow_mode():
    tmp = gdtest.temp_dir()
    x = np.zeros((2, 12), np.float32)
    x[1, 3] = np.inf
    np.save(os.path.join(tmp, "x.npy"), x)
    cfg = gdtest.write_config(os.path.join(tmp, "d.json"), os.path.join(tmp, "dump"),
                              {"op_debug_mode": 3})
    gdtest.run("run", gdmodels.model_path("mlp"), "--input", os.path.join(tmp, "x.npy"),
               "--config", cfg, check=0)
    files = glob.glob(os.path.join(tmp, "dump", "rank_0", "Net", "0", "0", "*.output.*.npy"))
    assert len(files) > 0, "overflowing kernels dumped"
    for f in files:
        assert not np.isfinite(np.load(f)).all(), f"{f} holds NaN or Inf"
    gdtest.cleanup(tmp)
    # Finite input: nothing overflows, nothing is written.
    tmp, root, _ = dump_run("mlp", {"op_debug_mode": 3}, args=MLP)
    assert tensors(step(root, 0)) == [], "no overflow, no files"
    gdtest.cleanup(tmp)


def test_exception_mode():
    tmp, root, out = dump_run("failing", {"op_debug_mode": 4}, args=["--input-shape", "2x8"],
                              check=3)
    line = gdmodels.source_line("torch.matmul(h, self.weight)  # FAILS_HERE")
    assert f"make_models.py:{line}" in out and "matmul" in out, (
        f"the error names the kernel and its line {line}:\n{out}")
    got = tensors(step(root, 0))
    assert (sorted(got) == [("Default_matmul-op2", "input", 0),
                                   ("Default_matmul-op2", "input", 1)]), (
        "exactly the failing kernel's inputs")
    weight = torch.jit.load(gdmodels.model_path("failing")).weight.detach().numpy()
    f = glob.glob(os.path.join(step(root, 0), "matmul.*.input.1.*.npy"))
    assert f and np.array_equal(np.load(f[0]), weight), "input 1 is the weight"
    gdtest.cleanup(tmp)


def test_sampling_kernel_args_constants():
    tmp, root, _ = dump_run("alexnet", {"dump_mode": 1, "kernels": ["conv2d"]},
                            {"sample_mode": 1, "sample_num": 10, "save_kernel_args": True},
                            args=["--input-shape", "1x3x64x64"])
    d = step(root, 0)
    outs = glob.glob(os.path.join(d, "conv2d.*.output.0.*.npy"))
    assert len(outs) == 5 and all(np.load(f).shape == (10,) for f in outs), (
        "sampled outputs have shape (10,)")
    args = glob.glob(os.path.join(d, "conv2d.Default_features-Sequential_0-Conv2d_conv2d-op0.json"))
    assert len(args) == 1, f"kernel args file: {os.listdir(d)[:5]}"
    j = json.load(open(args[0]))
    assert j.get("stride") == "[4, 4]" and j.get("padding") == "[2, 2]", f"kernel args: {j}"
    consts = glob.glob(os.path.join(root, "Net", "0", "constants", "Parameter.data-*.npy"))
    assert len(consts) > 0, "constants written once per graph"
    gdtest.cleanup(tmp)


def test_trans_flag():
    for flag in (True, False):
        tmp = gdtest.temp_dir()
        torch.manual_seed(0)
        x = torch.randn(1, 3, 5, 6)
        np.save(os.path.join(tmp, "x.npy"), x.numpy())
        cfg = gdtest.write_config(os.path.join(tmp, "d.json"), os.path.join(tmp, "dump"),
                                  {"input_output": 2}, {"enable": True, "trans_flag": flag})
        gdtest.run("run", gdmodels.model_path("channels_last"), "--input",
                   os.path.join(tmp, "x.npy"), "--config", cfg, check=0)
        d = os.path.join(tmp, "dump", "rank_0", "Net", "0", "0")
        conv = glob.glob(os.path.join(d, "conv2d.*.output.0.*.npy"))
        m = torch.jit.load(gdmodels.model_path("channels_last"))
        with torch.no_grad():
            y = m.conv(x.contiguous(memory_format=torch.channels_last))
        assert len(conv) == 1, "conv output dumped"
        got = np.load(conv[0])
        fmt = FILE.match(os.path.basename(conv[0])).group("fmt")
        if flag:
            assert fmt == "DefaultFormat" and np.array_equal(got, y.numpy()), (
                f"trans_flag true: logical NCHW ({fmt}, {got.shape})")
        else:
            assert (fmt == "NHWC" and
                    np.array_equal(got, y.permute(0, 2, 3, 1).numpy())), (
                f"trans_flag false: as stored, NHWC ({fmt}, {got.shape})")
        gdtest.cleanup(tmp)


def test_sync_and_async_write_the_same_files():
    contents = []
    for enable in (True, False):
        tmp, root, _ = dump_run("small_cnn", {"saved_data": "full"}, {"enable": enable},
                                args=["--input-shape", "2x3x16x16", "--classes", "5"], train=True)
        d = step(root, 0)
        files = {}
        for path in glob.glob(os.path.join(d, "*.npy")):
            key = re.sub(r"\.\d{10,}\.", ".T.", os.path.basename(path))
            files[key] = np.load(path)
        contents.append(files)
        gdtest.cleanup(tmp)
    sync, asyn = contents
    assert sorted(asyn) == sorted(sync), "async writes the same file names"
    assert all(np.array_equal(sync[k], asyn[k]) for k in sync if k in asyn), (
        "async writes the same contents")
    assert any(k.startswith("ReluBackward0") for k in sync), "backward kernels dumped"
    # Slots are the backward node's indexes: conv1 has no gradient for the network input, so its
    # ConvolutionBackward0 writes outputs 1 (weight) and 2 (bias) only; conv2 writes all three.
    for layer, shapes in (("conv1", {1: (8, 3, 3, 3), 2: (8,)}),
                          ("conv2", {0: (2, 8, 8, 8), 1: (16, 8, 3, 3), 2: (16,)})):
        found = {int(re.search(r"\.output\.(\d+)\.", k).group(1)): sync[k].shape for k in sync
                 if k.startswith(f"ConvolutionBackward0.Gradients_Default_{layer}-")
                 and ".output." in k}
        assert found == shapes, f"{layer} ConvolutionBackward0 output slots and shapes"


def test_dump_off_says_why():
    """A run that dumps nothing says why: no configuration, a rank outside support_device, or a
    GE-dialect file with enable_dump false."""
    model = gdmodels.model_path("mlp")
    tmp = gdtest.temp_dir()
    try:
        cfg = gdtest.write_config(os.path.join(tmp, "sd.json"), os.path.join(tmp, "dump"),
                                  {"support_device": [1, 2]})
        off = os.path.join(tmp, "off.json")
        with open(off, "w") as f:
            json.dump({"dump": {"enable_dump": False, "dump_path": os.path.join(tmp, "ge")}}, f)
        for args, env, why in (
                ([], {}, "no --config; GRAPHDUMP_CONFIG and MINDSPORE_DUMP_CONFIG unset"),
                (["--config", cfg], {}, f"rank 0 is not in support_device [1,2] of {cfg}"),
                ([], {"GRAPHDUMP_CONFIG": off}, f"{off} has enable_dump false")):
            rc, out, err = gdtest.run("run", model, *MLP, *args, env=env)
            assert rc == 0 and f"dump: off ({why})\n" in out, (
                f"dump off {args} {env}: exit {rc}\n{out}{err}")
        assert sorted(os.listdir(tmp)) == ["off.json", "sd.json"], "nothing dumped"
    finally:
        gdtest.cleanup(tmp)


def test_train_option_errors():
    """Out-of-range numbers are usage errors (exit 2) that say what is allowed, before the
    model loads."""
    model = gdmodels.model_path("mlp")
    for args, message in ((["--steps", "0"], "--steps: Value 0 not in range 1 to 1000000"),
                          (["--lr", "-1"], "--lr: '-1' is not a positive number"),
                          (["--lr", "0"], "--lr: '0' is not a positive number"),
                          (["--classes", "0"], "--classes: Value 0 not in range 1 to")):
        rc, out, err = gdtest.run("train", model, *MLP, *args)
        assert rc == 2 and message in err and "step" not in out, (
            f"train {' '.join(args)}: exit {rc}\n{out}{err}")



if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
