"""graphdump replay (docs/precision.md, "Replay"): sum_net's bfloat16 index_add is inaccurate,
naive_var's subtraction ill-conditioned (its own error is nil), the kernels after them inherit;
the three numbers equal float64 arithmetic in NumPy on the dumped inputs; conv2d, linear, matmul,
softmax, layer_norm and add replay bit for bit in float32 and bfloat16; the graph files record
schemas and arguments; random kernels, run-time arguments, backward and optimizer kernels are
refused saying why; bad names, iterations and ranks are usage errors listing what exists."""
import json
import os
import sys

import numpy as np
import pytest
import torch

import gdmodels
import gdtest as t
import precision_fixture as p


def replay(*args, check=0):
    code, out, err = t.run("replay", *args, env=p.ONE_THREAD)
    if check is not None and code != check:
        raise AssertionError(f"replay {args} exited {code}:\n{out}\n{err}")
    return code, out, err


def replay_json(*args):
    return json.loads(replay(*args, "--json")[1])


def bf16(a):
    """float64 of `a` rounded to bfloat16 (round to nearest even, as torch does)."""
    return torch.from_numpy(np.asarray(a, dtype=np.float32)).bfloat16().double().numpy()


def rel(a, b, norm_of=None):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ref = b if norm_of is None else np.asarray(norm_of, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(ref))


def close(x, y, what):
    assert abs(x - y) <= 1e-9 * max(abs(y), 1e-300) + 1e-15, f"{what}: {x} vs {y}"


@pytest.fixture(scope="module")
def sum_runs(module_scratch):
    """sum_net in float32 and bfloat16: (fp32 dump, bf16 dump, names, index_add, mul, tanh)."""
    # sum_net: the bfloat16 index_add accumulates in bfloat16.
    fp32, _, _ = p.dump_run(module_scratch, "sum_fp32", "sum_net", ["sum_x.npy"])
    low, _, _ = p.dump_run(module_scratch, "sum_bf16", "sum_net", ["sum_x.npy"],
                           "--precision", "bf16")
    names = p.kernel_names(fp32)
    add, mul, tanh = p.find(names, "index_add"), p.find(names, "mul"), p.find(names, "tanh")
    return fp32, low, names, add, mul, tanh


@pytest.fixture(scope="module")
def var_runs(module_scratch):
    """naive_var in float32 and bfloat16: (fp32 dump, bf16 dump, names, sub)."""
    # naive_var: E[x^2] - E[x]^2 in bfloat16 is exact but cancels.
    vfp32, _, _ = p.dump_run(module_scratch, "var_fp32", "naive_var", ["var_x.npy"])
    vlow, _, _ = p.dump_run(module_scratch, "var_bf16", "naive_var", ["var_x.npy"],
                            "--precision", "bf16")
    vnames = p.kernel_names(vfp32)
    sub = p.find(vnames, "sub")
    return vfp32, vlow, vnames, sub


# The kernel that is inaccurate in bfloat16 was a torch.dot, which LibTorch 1.13 accumulated in
# bfloat16 on the CPU; torch 2 accumulates it in float32 (accurate to its output's rounding), so
# the test's model sums with index_add, which still accumulates in its tensor's dtype.
def test_sum_net_index_add_is_inaccurate(sum_runs):
    fp32, low, names, add, mul, tanh = sum_runs
    r = replay_json(low, add, "--reference", fp32)
    assert ((r["kernel"], r["verdict"], r["dtype"], r["replayable"])
            == (add, "inaccurate", "bfloat16", True)), "sum_net's index_add in bfloat16"
    assert r["reproduces"], f"the replayed index_add equals the dumped one bit for bit: {r}"
    assert r["schema"].startswith(
        "aten::index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1)"
        " -> Tensor"), f"schema recorded: {r['schema']}"
    # Inputs: self (the zero total), index (int64, all 0: one segment), source (h).
    total, index, h = (p.load(low, add, "input", i) for i in range(3))
    assert index.dtype == np.int64 and not index.any(), "one segment"
    exact = float(total.astype(np.float64).sum() + h.astype(np.float64).sum())
    close(r["own"]["rel_l2"], rel(p.load(low, add, "output", 0), [exact]),
          "own = |sum - f64|/|f64|")
    close(r["rounding"], rel(bf16([exact]), [exact]), "rounding = output rounded to bfloat16")
    assert r["own"]["rel_l2"] > 0.05 and r["own"]["rel_l2"] > 10 * r["rounding"], (
        f"the sum's own error dwarfs its output's rounding: {r['own']} {r['rounding']}")
    hr = p.load(fp32, add, "input", 2)
    ref_exact = float(hr.astype(np.float64).sum())
    ref_rounded = float(bf16(hr).sum())
    close(r["conditioning"]["rel_l2"], rel([ref_rounded], [ref_exact]),
          "conditioning = f64(rounded ref inputs) vs f64(ref inputs)")
    close(r["inherited"]["rel_l2"], rel([exact], [ref_rounded], [ref_exact]),
          "inherited = f64(inputs) vs f64(rounded ref inputs), over |f64(ref inputs)|")
    assert r["conditioning"]["rel_l2"] < 0.01 and r["inherited"]["rel_l2"] < 0.01, (
        f"a sum of non-negative terms is well-conditioned, its inputs close: {r}")
    assert (r["reason"].startswith("inaccurate at bfloat16: its own error (")
            and "times what rounding its output to bfloat16 gives" in r["reason"]), (
        f"verdict in words: {r['reason']}")
    _, text, _ = replay(low, "index_add", "--reference", fp32)
    assert ("verdict    inaccurate at bfloat16" in text and f"kernel     {add}" in text
            and "precision_models.py:" in text), (
        f"text output names kernel, line, verdict:\n{text}")
    for neighbour in (mul, tanh):
        r = replay_json(low, neighbour, "--reference", fp32)
        assert r["verdict"] == "inherits", f"{neighbour} after the sum: {r['reason']}"
        assert (r["input_difference"] > 0.05 and r["reason"].startswith(
                "inherits: its inputs already differ from the reference run's by")), (
            f"{r}")
    s, scale = p.load(low, mul, "input", 0), p.load(low, mul, "input", 1)
    sr, scaler = p.load(fp32, mul, "input", 0), p.load(fp32, mul, "input", 1)
    r = replay_json(low, mul, "--reference", fp32)
    f64 = lambda a: np.asarray(a, dtype=np.float64)  # 0-d arrays would not promote float32
    ref_exact = f64(sr) * f64(scaler)
    close(r["inherited"]["rel_l2"], rel(f64(s) * f64(scale), bf16(sr) * bf16(scaler), ref_exact),
          "mul's inherited error")
    close(r["input_difference"], max(rel(s, sr), rel(scale, scaler)), "mul's input difference")
    r = replay_json(low, add)  # no reference: own only
    assert (r["verdict"], "conditioning" in r) == ("inaccurate", False), "sum without reference"


def test_naive_var_subtraction_is_ill_conditioned(var_runs):
    vfp32, vlow, vnames, sub = var_runs
    r = replay_json(vlow, sub, "--reference", vfp32)
    assert r["verdict"] == "ill-conditioned", f"naive_var's subtraction: {r['reason']}"
    assert r["own"]["rel_l2"] == 0.0, "the subtraction is exact in bfloat16: no own error"
    assert r["reproduces"], "the replayed subtraction equals the dumped one"
    a, b = p.load(vfp32, sub, "input", 0), p.load(vfp32, sub, "input", 1)
    exact = a.astype(np.float64) - b
    close(r["conditioning"]["rel_l2"], rel(bf16(a) - bf16(b), exact), "sub's conditioning")
    assert (r["conditioning"]["rel_l2"] > 0.5 and r["conditioning"]["rel_l2"] > 10 * r[
            "inherited"]["rel_l2"]), (
        f"rounding the inputs alone ruins the variance: {r}")
    assert (r["reason"].startswith("ill-conditioned: rounding its inputs to bfloat16 alone gives "
                                   "error ")), (
        f"words: {r['reason']}")
    after = vnames[vnames.index(sub) + 1]
    r = replay_json(vlow, after, "--reference", vfp32)
    assert r["verdict"] == "inherits", f"{after}, after the subtraction: {r['reason']}"
    # The graph files record the call.
    with open(os.path.join(vfp32, "graphs", "ms_output_trace_code_graph_0.ir")) as f:
        ir = f.read()
    assert ("# Schema: aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
            in ir and "# Arguments: (self=input.0, other=input.1, alpha=1)" in ir), (
        f"the .ir records sub's schema and arguments:\n{ir}")


def test_replay_ops_reproduce_bit_for_bit(module_scratch):
    # replay_ops: each kernel reproduces its dumped output bit for bit, in float32 and bfloat16.
    ofp32, _, _ = p.dump_run(module_scratch, "ops_fp32", "replay_ops", ["ops_x.npy"])
    olow, _, _ = p.dump_run(module_scratch, "ops_bf16", "replay_ops", ["ops_x.npy"],
                            "--precision", "bf16")
    onames = p.kernel_names(ofp32)
    for run, dtype in ((ofp32, "float32"), (olow, "bfloat16")):
        for op in ("conv2d", "linear", "matmul", "softmax", "layer_norm", "add"):
            r = replay_json(run, p.find(onames, op))
            assert (r["replayable"] and r["reproduces"] and r["reproduce_max_abs"] == 0
                    and r["dtype"] == dtype), (
                f"{op} in {dtype} replays bit for bit: {r}")
    with open(os.path.join(ofp32, "graphs", "ms_output_trace_code_graph_0.ir")) as f:
        ir = f.read()
    assert ("stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1" in ir
            and "normalized_shape=[8], weight=input.1, bias=input.2, eps=1e-05" in ir), (
        f"conv2d's and layer_norm's constants in the .ir:\n{ir}")


def test_random_and_run_time_arguments_are_not_replayable(module_scratch):
    # Kernels that cannot be replayed: exit 3 and the reason.
    models = os.path.join(module_scratch, "models")
    os.makedirs(models)

    class Noisy(torch.nn.Module):
        def forward(self, x):
            y = torch.nn.functional.dropout(x, 0.5, True)
            return y.view(x.size(0), -1)

    torch.jit.save(torch.jit.script(Noisy()), os.path.join(models, "noisy.pt"))
    np.save(os.path.join(models, "x.npy"), np.ones((2, 3, 4), dtype=np.float32))
    dump = os.path.join(module_scratch, "noisy")
    cfg = t.write_config(os.path.join(module_scratch, "noisy.json"), dump, {"net_name": "Net"})
    t.run("run", os.path.join(models, "noisy.pt"), "--input", os.path.join(models, "x.npy"),
          "--config", cfg, check=0)
    code, out, err = replay(dump, "dropout", check=None)
    assert (code == 3 and "not replayable: it is a random operator" in err
            and "random generator" in err), (
        f"dropout: {code} {err}")
    code, out, err = replay(dump, "view", "--json", check=None)
    r = json.loads(out)
    assert (code == 3 and not r["replayable"] and "argument 'size' was computed while the "
            "graph ran" in r["reason"]), (
        f"view(x.size(0), -1): {code} {out} {err}")


def test_training_kernels(module_scratch):
    # Training: forward kernels replay; backward and optimizer kernels are refused.
    dump = os.path.join(module_scratch, "train")
    cfg = t.write_config(os.path.join(module_scratch, "train.json"), dump, {"net_name": "Net"})
    t.run("train", gdmodels.model_path("mlp"), "--steps", "2", "--input-shape", "4x12",
          "--classes", "3", "--config", cfg, env=p.ONE_THREAD, check=0)
    r = replay_json(dump, "fc2-Linear/linear", "--iteration", "1")
    assert (r["iteration"] == 1 and r["reproduces"] and r["verdict"] == "accurate"
            and r["reason"].startswith("accurate at float32: its own error (")
            and " is within 4 roundings of float32" in r["reason"]), (
        f"train linear: {r}")
    r = replay_json(dump, "fc2-Linear/linear")
    assert (r["iteration"] == 0 and "replayed iteration 0 of 0, 1 (choose with --iteration)"
            in r["notes"]), (
        f"first of two iterations, noted: {r}")
    code, out, err = replay(dump, "NllLossBackward0", check=None)
    assert code == 3 and "it is a backward kernel" in err, f"backward kernel: {code} {err}"
    code, out, err = replay(dump, "ApplyGradientDescent-op15", check=None)
    assert code == 3 and "it is an optimizer update" in err, f"optimizer: {code} {err}"


def test_usage_errors(module_scratch, sum_runs, var_runs):
    fp32, low, names, add, mul, tanh = sum_runs
    vfp32 = var_runs[0]
    # Usage errors: exit 2, naming what was given and the candidates.
    code, _, err = replay(low, "op", check=None)
    assert code == 2 and "'op' matches 6 kernels" in err and add in err, f"ambiguous: {err}"
    code, _, err = replay(low, "nosuch", check=None)
    assert code == 2 and "no kernel of" in err and "'nosuch'" in err and add in err, (
        f"unknown kernel: {err}")
    code, _, err = replay(low, add, "--iteration", "7", check=None)
    assert code == 2 and "--iteration 7" in err and "iterations 0" in err, f"iteration: {err}"
    code, _, err = replay(low, add, "--rank", "3", check=None)
    assert code == 2 and "--rank 3" in err and "holds ranks 0" in err, f"rank: {err}"
    code, _, err = replay(low, add, "--reference", vfp32, check=None)
    assert code == 2 and "the reference" in err and add in err, f"reference lacks it: {err}"
    code, _, err = replay(os.path.join(module_scratch, "missing"), add, check=None)
    assert code == 2 and "missing" in err, f"missing dump: {err}"
    code, out, _ = t.run("replay", "--help")
    assert (code == 0 and "graphdump replay bf16/ dot --reference fp32/" in out
            and "ill-conditioned" in out), (
        f"--help teaches: {out}")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
