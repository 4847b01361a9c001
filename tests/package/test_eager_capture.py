"""Eager capture: unmodified eager PyTorch scripts under `graphdump python`, no TorchScript.

eager_lm.py is written like model libraries write models (a **kwargs forward returning a dict,
activation checkpointing, accumulation over 2 micro-batches, LambdaLR, clipping, a no_grad
validation call between steps); eager_small.py holds the small cases."""
import csv
import glob
import json
import os
import re
import socket
import subprocess

import numpy as np
import pytest

from conftest import (BIN, HERE, clean_env, every_npy_loads, execution_order, global_order,
                      graphdump, python, write_config)

LM = os.path.join(HERE, "eager_lm.py")
SMALL = os.path.join(HERE, "eager_small.py")
STEPS = 3
# The embedding is the root's seventh operator: ones, triu, then the padding mask
# `attention_mask[:, None, None, :] == 0` as unsqueeze, unsqueeze, eq, and `mask | ...`
# (__or__). torch 2 indexes without the full-range slices `:` (LibTorch 1.13 called aten::slice
# for each, which made it op8).
EMBEDDING = "Default/embed-Embedding/embedding-op6"


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eager_lm")
    python(LM, tmp / "plain.npz", check=0)
    config = write_config(tmp / "dump.json", tmp / "dump", {
        "saved_data": "full", "statistic_category": ["max", "min", "avg", "count", "nan count"]})
    run = graphdump("python", "--config", config, LM, tmp / "dumped.npz", check=0)
    return {"tmp": tmp, "run": run, "rank": tmp / "dump" / "rank_0",
            "order": execution_order(tmp / "dump" / "rank_0")}


def test_parameters_bit_identical_to_plain_python(lm):
    plain, dumped = np.load(lm["tmp"] / "plain.npz"), np.load(lm["tmp"] / "dumped.npz")
    assert len(plain.files) == 29
    for key in plain.files:
        assert np.array_equal(plain[key], dumped[key]), key
    assert "not TorchScript" not in lm["run"].stderr and "TypeError" not in lm["run"].stderr


def test_forward_kernels_inside_and_outside_modules(lm):
    order = lm["order"]
    names = set(order)
    # The root's own operators (the mask), modules outside the blocks, inside the blocks.
    assert order[0] == "Default/ones-op0"
    assert EMBEDDING in names
    assert [k.rsplit("/", 1)[1] for k in order[:6]] == [
        "ones-op0", "triu-op1", "unsqueeze-op2", "unsqueeze-op3", "eq-op4", "__or__-op5"]
    assert any(re.fullmatch(r"Default/blocks-ModuleList/1-Block/attn-Attention/qkv-Linear/"
                            r"linear-op\d+", k) for k in order)
    assert any(re.fullmatch(r"Default/norm-LayerNorm/layer_norm-op\d+", k) for k in order)
    assert any(re.fullmatch(r"Default/head-Linear/linear-op\d+", k) for k in order)
    assert any(re.fullmatch(r"Default/cross_entropy_loss-op\d+", k) for k in order)
    # The script's own operators: the loss division and clip_grad_norm_. torch 2 takes the
    # gradients' norms in one _foreach_norm and scales them in one _foreach_mul_, on the CPU
    # too (LibTorch 1.13 called norm and mul_ per gradient).
    assert any(re.fullmatch(r"Default/script/div-op\d+", k) for k in order)
    assert any(re.fullmatch(r"Default/script/_foreach_norm-op\d+", k) for k in order)
    assert any(re.fullmatch(r"Default/script/_foreach_mul_-op\d+", k) for k in order)
    # Outermost calls only: linear, never the addmm inside it.
    assert not any("addmm" in k and not k.startswith("Gradients/") for k in order)


def test_recomputation_is_marked(lm):
    recomputed = [k for k in lm["order"] if k.startswith("Recompute/")]
    assert any(k.startswith("Recompute/Default/blocks-ModuleList/0-Block/attn-Attention/"
                            "softmax-op") for k in recomputed), recomputed[:5]
    # The forward's own calls of the blocks stay Default/...
    forward = {re.sub(r"-op\d+$", "", k) for k in lm["order"] if k.startswith("Default/blocks")}
    again = {re.sub(r"-op\d+$", "", k[len("Recompute/"):]) for k in recomputed}
    assert again <= forward and len(again) > 20


def test_each_call_is_dumped_and_ordered(lm):
    # Iteration 0: 2 micro-batches; iterations 1-2: the validation call after the previous
    # step, then 2 micro-batches; iteration 3: the last validation call.
    assert global_order(lm["rank"]) == [0, 0, 1, 1, 1, 2, 2, 2, 3]
    base = lm["rank"] / "Net" / "0"
    for iteration, calls in ((0, 2), (1, 3), (3, 1)):
        files = glob.glob(f"{base}/{iteration}/embedding.Default_embed-Embedding_embedding-op6"
                          ".*.output.0.*.npy")
        assert len(files) == calls, (iteration, files)
        stamps = {os.path.basename(f).split(".")[4] for f in files}
        assert len(stamps) == calls
    # The validation call ran in eval mode under no_grad: no recomputation in iteration 3.
    assert not glob.glob(f"{base}/3/*Recompute*")
    assert every_npy_loads(lm["rank"]) > 1000


def test_backward_and_optimizer_kernels_named_after_parameters(lm):
    order = lm["order"]
    assert "unnamed" not in " ".join(order)
    assert any(re.fullmatch(r"Gradients/Default/embed-Embedding/embed_weight/AccumulateGrad-op\d+",
                            k) for k in order)
    updates = {k.split("/")[2] for k in order if k.startswith("Default/optimizer-AdamW/")}
    assert len(updates) == 29 and "blocks_0_attn_qkv_weight" in updates
    # The update's input 0 is the parameter before the step, output 0 after it: iteration 2's
    # output is the script's final parameter.
    last = glob.glob(f"{lm['rank']}/Net/0/2/AdamW.Default_optimizer-AdamW_head_weight_AdamW-op*"
                     ".output.0.*.npy")
    assert len(last) == 1
    assert np.array_equal(np.load(last[0]), np.load(lm["tmp"] / "dumped.npz")["head.weight"])


def test_source_lines_and_graph_files(lm):
    ir = open(lm["rank"] / "graphs" / "ms_output_trace_code_graph_0.ir").read()
    block = ir[ir.index(f"({EMBEDDING})"):]
    block = block[:block.index("\n  %")]
    assert f"In file {LM}(69)/x = self.embed(input_ids)/" in block
    # Dataflow: the embedding reads the parameter and the input ids; the first layer norm of
    # block 0 reads the embedding's output (%6).
    assert re.search(r"%6\(embedding\) = embedding\(%embed\.weight, %input1\)", ir)
    assert re.search(r"= layer_norm\(%6, %blocks\.0\.norm1\.weight, %blocks\.0\.norm1\.bias\)", ir)
    assert "# Schema: aten::embedding(Tensor weight, Tensor indices" in ir


def _numpy_statistics(a):
    x = a.astype(np.float64).ravel()
    return {"Max Value": x.max(), "Min Value": x.min(), "Avg Value": x.mean(),
            "Count": x.size, "NaN Count": int(np.isnan(x).sum())}


def test_statistics_match_numpy(lm):
    directory = lm["rank"] / "Net" / "0" / "1"
    with open(directory / "statistic.csv", newline="") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    checked = 0
    for row in rows:
        values = dict(zip(header, row))
        if values["Data Type"] not in ("float32", "int64") or values["Count"] == "0":
            continue
        matches = glob.glob(f"{directory}/{values['Op Type']}.{values['Op Name']}.0.0."
                            f"{values['Timestamp']}.{values['IO']}.{values['Slot']}.*.npy")
        assert len(matches) == 1, values
        a = np.load(matches[0])
        if a.dtype == bool or a.size == 0:
            continue
        for column, expected in _numpy_statistics(a).items():
            assert float(values[column]) == pytest.approx(expected, rel=1e-5, abs=1e-6), (
                matches[0], column)
        checked += 1
    assert checked > 500


def test_nan_found_by_watch_with_the_script_line(tmp_path):
    # Step 1's first micro-batch holds an all-padding sequence: softmax over all -inf.
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "statistic"})
    graphdump("python", "--config", config, LM, tmp_path / "o.npz", "--padded-step", "1",
              check=0)
    watch = graphdump("watch", tmp_path / "dump", "--check", "nan", "--first")
    assert watch.returncode == 1, watch.stdout + watch.stderr
    assert re.search(r"iteration 1\b", watch.stdout), watch.stdout
    assert "Default/blocks-ModuleList/0-Block/attn-Attention/softmax-op" in watch.stdout
    line = next(i for i, text in enumerate(open(LM), 1) if "scores.softmax(dim=-1)" in text)
    assert f"eager_lm.py:{line}" in watch.stdout and "call 1 of 3" in watch.stdout, watch.stdout


def _run_small(tmp_path, mode, common=None):
    config = write_config(tmp_path / f"{mode}.json", tmp_path / mode, common)
    run = graphdump("python", "--config", config, SMALL, mode)
    return run, tmp_path / mode / "rank_0"


def test_scripted_and_eager_kernels_compare_by_name(tmp_path):
    eager_run, eager = _run_small(tmp_path, "forward")
    script_run, scripted = _run_small(tmp_path, "scripted")
    assert eager_run.returncode == 0 and script_run.returncode == 0, eager_run.stderr
    assert eager_run.stdout == script_run.stdout
    # The model's kernels have the same names; the eager dump also holds the script's own
    # operators after the call (`.sum()`, `.item()`).
    model = [k for k in execution_order(eager) if not k.startswith("Default/script/")]
    assert model == execution_order(scripted)
    assert model[0] == "Default/features-Sequential/0-Linear/linear-op0" and len(model) == 5
    compare = graphdump("compare", tmp_path / "forward", tmp_path / "scripted", "--json")
    assert compare.returncode == 0, compare.stdout + compare.stderr
    result = json.loads(compare.stdout)
    paired = {k["kernel_a"] for k in result["kernels"] if k["kernel_a"] == k["kernel_b"]}
    assert set(model) <= paired, (model, paired)
    assert result["summary"]["error"] == 0 and result["first_failure"] is None
    assert {u["kernel"] for u in result["unpaired"]} == {"Default/script/sum-op5",
                                                          "Default/script/item-op6"}
    # The graph files hold the outputs of the kernels the script ran after its last call too
    # (learned after that call ended, sent when the run ends).
    ir = open(eager / "graphs" / "ms_output_trace_code_graph_0.ir").read()
    assert re.search(r"%5\(sum\) = sum\(%4\).*\n\s+: \(<Tensor\[float32\], \(4, 3\)>\) -> "
                     r"\(<Tensor\[float32\], \(\)>\)\n", ir), ir


def test_dataflow_never_names_a_dead_tensors_producer(tmp_path):
    # Each `x.data` is made by no kernel, right after `y = x * 2` died: it must not be taken
    # for that multiplication's output, even where it gets the dead tensor's address.
    run, rank = _run_small(tmp_path, "reuse")
    assert run.returncode == 0, run.stderr
    ir = open(rank / "graphs" / "ms_output_trace_code_graph_0.ir").read()
    adds = re.findall(r"%(\d+)\(add\) = add\(%(\w+), %(\w+)\)", ir)
    assert len(adds) == 20, ir
    for index, first, second in adds:
        assert first == "input0" or first == str(int(index) - 2), (index, first)
        assert not second.isdigit(), (index, second)


def test_in_place_input_is_dumped_before_the_write(tmp_path):
    run, rank = _run_small(tmp_path, "inplace")
    assert run.returncode == 0, run.stderr
    x = np.load(glob.glob(f"{rank}/Net/0/0/mul.*.input.0.*.npy")[0])
    before = np.load(glob.glob(f"{rank}/Net/0/0/add_.*.input.0.*.npy")[0])
    after = np.load(glob.glob(f"{rank}/Net/0/0/add_.*.output.0.*.npy")[0])
    np.testing.assert_array_equal(before, x * 2)
    np.testing.assert_array_equal(after, x * 2 + 1)


def test_autocast_kernels_dumped_in_bfloat16(tmp_path):
    run, rank = _run_small(tmp_path, "autocast")
    assert run.returncode == 0, run.stderr
    outputs = glob.glob(f"{rank}/Net/0/0/linear.*.output.0.*.npy")
    assert len(outputs) == 2 and all(f.endswith(".bfloat16.npy") for f in outputs), outputs
    # The input is the script's float32 tensor; autocast casts it inside the kernel.
    assert glob.glob(f"{rank}/Net/0/0/linear.Default_0-Linear_linear-op0.*.input.0.*.float32.npy")


def test_failing_kernel_named_in_the_log_not_in_the_exception(tmp_path):
    run, rank = _run_small(tmp_path, "raises", {"op_debug_mode": 4})
    assert run.returncode == 1
    line = next(i for i, text in enumerate(open(SMALL), 1) if "return x @ x" in text)
    # The script's exception is PyTorch's own; graphdump's log names the kernel and the line.
    assert re.search(r"\nRuntimeError: mat1 and mat2 shapes cannot be multiplied \(4x6 and "
                     r"4x6\)\n", run.stderr), run.stderr
    assert re.search(r"graphdump: kernel Default/matmul-op0 \(aten::matmul\) failed at "
                     rf"\S*eager_small.py:{line} `return x @ x", run.stderr), run.stderr
    assert len(glob.glob(f"{rank}/Net/0/0/matmul.Default_matmul-op0.*.input.*.npy")) == 2
    # The dump's INCOMPLETE marker says why the script ended, the kernel included.
    marker = (rank / ".dump_metadata" / "INCOMPLETE").read_text()
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in marker, marker
    assert "kernel Default/matmul-op0 (aten::matmul) failed at" in marker, marker


def test_ddp_over_an_eager_module_on_two_ranks(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    run = graphdump("python", "--config", config, "--nproc", 2,
                    os.path.join(HERE, "user_ddp.py"), tmp_path / "out", "--eager", check=0)
    assert "[rank 1] rank 1/2" in run.stdout
    for rank in (0, 1):
        root = tmp_path / "dump" / f"rank_{rank}"
        order = execution_order(root)
        assert order[0] == "Default/fc1-Linear/linear-op0", order[:3]
        assert any(k.startswith("Default/allreduce-DataParallel/fc1_weight/AllReduce-op")
                   for k in order)
        assert global_order(root) == [0, 1, 2]
    for it in range(3):
        kernel = "AllReduce.Default_allreduce-DataParallel_fc2_bias_AllReduce-op*"
        local = [np.load(glob.glob(f"{tmp_path}/dump/rank_{r}/Net/0/{it}/{kernel}.input.0.*.npy")[0])
                 for r in (0, 1)]
        reduced = np.load(glob.glob(f"{tmp_path}/dump/rank_0/Net/0/{it}/{kernel}.output.0.*.npy")[0])
        np.testing.assert_allclose(reduced, (local[0] + local[1]) / 2, rtol=1e-6)


def _op_types(rank):
    files = glob.glob(f"{rank}/Net/0/0/*.npy")
    return {os.path.basename(f).split(".")[0] for f in files}, files


@pytest.mark.parametrize("name, common, e2e, expected", [
    ("async", {}, {"enable": False}, {"linear", "tanh", "layer_norm", "sum", "item"}),
    ("kernels", {"dump_mode": 1, "kernels": ["layer_norm", "name-regex(.*head.*)"]}, None,
     {"layer_norm", "linear"}),
    # `.item()` returns a Python number: no output file.
    ("outputs", {"input_output": 2}, None, {"linear", "tanh", "layer_norm", "sum"}),
    ("overflow", {"op_debug_mode": 3}, None, set()),
])
def test_configuration_features_in_eager_mode(tmp_path, name, common, e2e, expected):
    config = write_config(tmp_path / "c.json", tmp_path / name, common, e2e)
    run = graphdump("python", "--config", config, SMALL, "forward", check=0)
    rank = tmp_path / name / "rank_0"
    types, files = _op_types(rank)
    assert types - {"Parameter"} == expected, (types, run.stderr)
    if name == "kernels":
        assert {os.path.basename(f).split(".")[1] for f in files if "linear" in f} == {
            "Default_head-Linear_linear-op4"}
    if name == "outputs":
        assert not [f for f in files if ".input." in f]
    if name == "async":
        sync_config = write_config(tmp_path / "s.json", tmp_path / "sync")
        graphdump("python", "--config", sync_config, SMALL, "forward", check=0)
        for f in files:
            base = os.path.basename(f).split(".")
            twin = glob.glob(f"{tmp_path}/sync/rank_0/Net/0/0/{base[0]}.{base[1]}.*."
                             f"{base[5]}.{base[6]}.*.npy")
            assert len(twin) == 1 and np.array_equal(np.load(f), np.load(twin[0])), f


def test_rank_outside_support_device_runs_undumped(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"support_device": [1]})
    run = graphdump("python", "--config", config, SMALL, "forward", check=0)
    assert run.stdout == python(SMALL, "forward", check=0).stdout
    assert "rank 0 is not in support_device [1]" in run.stderr
    assert not (tmp_path / "dump" / "rank_0").exists()


WORKERS = """
import torch
from torch.utils.data import DataLoader, TensorDataset

net = torch.nn.Linear(4, 2)
data = TensorDataset(torch.randn(16, 4), torch.randn(16, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
out = net(torch.randn(2, 4))  # an iteration is open (and captured) when the workers fork
for x, y in DataLoader(data, batch_size=4, num_workers=2):  # workers collate with torch.stack
    loss = ((net(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done")
"""


def test_forked_dataloader_workers_capture_nothing(tmp_path):
    script = tmp_path / "workers.py"
    script.write_text(WORKERS)
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    run = graphdump("python", "--config", config, script, check=0)
    assert "done" in run.stdout
    root = tmp_path / "dump" / "rank_0"
    order = execution_order(root)
    # torch.stack runs only in the workers: a kernel of it would be a child's capture.
    assert not [k for k in order if "/stack-op" in k], order
    # An optimizer exists from the start: the first call and the first batch are iteration 0.
    assert global_order(root) == [0, 0, 1, 2, 3]
    assert every_npy_loads(root) > 20


def test_replay_re_executes_an_eager_kernel(tmp_path):
    run, rank = _run_small(tmp_path, "forward")
    assert run.returncode == 0, run.stderr
    replay = graphdump("replay", tmp_path / "forward", "Default/norm-LayerNorm/layer_norm-op3",
                       "--json", check=0)
    result = json.loads(replay.stdout)
    assert result["verdict"] == "accurate", result
    assert "bit for bit" in graphdump("replay", tmp_path / "forward", "layer_norm").stdout


def test_overflow_mode_dumps_the_kernels_that_made_non_finite_values(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"op_debug_mode": 3})
    graphdump("python", "--config", config, LM, tmp_path / "o.npz", "--padded-step", "1",
              "--steps", "2", check=0)
    base = tmp_path / "dump" / "rank_0" / "Net" / "0"
    # masked_fill writes -inf in every step (the causal mask): dumped in both iterations; the
    # all-padding row's softmax makes NaN only in iteration 1.
    softmax = glob.glob(f"{base}/1/softmax.Default_blocks-ModuleList_0-Block_attn-Attention_"
                        "softmax-op*.output.0.*.npy")
    assert len(softmax) == 1 and np.isnan(np.load(softmax[0])).any()
    assert not glob.glob(f"{base}/0/softmax.*")
    # Every dumped kernel call has a non-finite output (all its outputs are written).
    calls = {}
    for f in glob.glob(f"{base}/*/*.output.*.npy"):
        key = ".".join(os.path.basename(f).split(".")[:5])
        calls[key] = calls.get(key, False) or not np.isfinite(np.load(f)).all()
    assert calls and all(calls.values()), [k for k, bad in calls.items() if not bad]
