"""PyTorch 2's operators and training features are kernels like any other, in ordinary scripts
run unchanged under `graphdump python` (eager_torch2.py; its docstring lists the modes).

What capture makes of them (torch 2.13, CPU), checked here:
  - F.scaled_dot_product_attention is one kernel, `scaled_dot_product_attention-op{N}`, in the
    scope of the module that calls it, with q, k and v as inputs 0-2 and the attention as output
    0. What it dispatches to inside (aten::_scaled_dot_product_flash_attention_for_cpu on the
    CPU, or the math path's matmul and softmax) is nested in it and so no kernel of its own: a
    kernel is an outermost operator call. Its backward is the autograd node of that inner
    operator (ScaledDotProductFlashAttentionForCpuBackward0 on the CPU), named in the module's
    Gradients/ scope.
  - F.rms_norm (and nn.RMSNorm) is one kernel `rms_norm`; its inner aten::_fused_rms_norm and
    the decomposition's pow, mean and rsqrt are nested. Its backward nodes are those of the
    decomposition (PowBackward0, MeanBackward1, RsqrtBackward0...).
  - Under torch.amp.autocast("cpu", dtype=torch.bfloat16) a linear kernel reads the script's
    float32 tensors (autocast's casts, aten::to, run inside it) and writes bfloat16.
  - checkpoint(..., use_reentrant=False) recomputes a block from a saved-tensor hook during the
    backward pass: those kernels are Recompute/..., with the forward's names after the prefix.
  - An optimizer's update is one kernel per parameter, Default/optimizer-{Class}/{param}/
    {Class}, whether the optimizer updates each tensor in turn (foreach=False) or all at once
    with _foreach_* operators (foreach=True): none of those operators is a kernel of its own.
  - Forwards under torch.no_grad() and torch.inference_mode() are dumped as any call, with no
    backward kernel.
  - A forward hook the script registers runs inside its module's call: its operators are
    kernels in that module's scope, and its result is what the next module reads.
In every mode the trained parameters are bit for bit those of the plain run."""
import glob
import os
import re

import numpy as np
import pytest

from conftest import (HERE, execution_order, global_order, graphdump, python, write_config)

SCRIPT = os.path.join(HERE, "eager_torch2.py")
MODES = ["base", "autocast", "checkpoint", "foreach", "single", "no_grad", "inference_mode",
         "forward_hook", "vmap"]
ATTN = "Default/blocks-ModuleList/0-Block/attn-Attention"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each mode run plain and dumped (every kernel, tensors), at its first use."""
    tmp = tmp_path_factory.mktemp("torch2")
    done = {}

    def run(mode, asynchronous=False):
        key = f"{mode}_async" if asynchronous else mode
        if key not in done:
            plain = python(SCRIPT, mode, tmp / f"{key}_plain.npz", check=0)
            config = write_config(tmp / f"{key}.json", tmp / key, None,
                                  {"enable": False} if asynchronous else None)
            dumped = graphdump("python", "--config", config, SCRIPT, mode,
                               tmp / f"{key}_dumped.npz", check=0)
            rank = tmp / key / "rank_0"
            done[key] = {"plain": np.load(tmp / f"{key}_plain.npz"), "run": dumped,
                         "plain_run": plain, "dumped": np.load(tmp / f"{key}_dumped.npz"),
                         "rank": rank, "order": execution_order(rank),
                         "base": rank / "Net" / "0"}
        return done[key]

    return run


def forward(order):
    return [k for k in order if k.startswith("Default/")]


def one(pattern):
    found = glob.glob(str(pattern))
    assert len(found) == 1, (pattern, found)
    return np.load(found[0])


def kernel_files(directory, full_name, io, slot="*"):
    """The tensor files of a kernel in an iteration directory, sorted by timestamp."""
    op_type = full_name.rsplit("/", 1)[1].rsplit("-op", 1)[0]
    name = re.sub(r"[/\\. ]", "_", full_name)
    files = glob.glob(f"{directory}/{op_type}.{name}.0.0.*.{io}.{slot}.*.npy")
    return sorted(files, key=lambda f: int(os.path.basename(f).split(".")[4]))


@pytest.mark.parametrize("mode", MODES)
def test_parameters_bit_identical_to_the_plain_run(runs, mode):
    r = runs(mode)
    assert r["plain_run"].stdout == r["run"].stdout
    assert len(r["plain"].files) == 21  # 20 parameters and the losses
    for key in r["plain"].files:
        assert np.array_equal(r["plain"][key], r["dumped"][key]), key
    assert "Traceback" not in r["run"].stderr and "failed" not in r["run"].stderr, r["run"].stderr


def test_scaled_dot_product_attention_is_one_kernel_with_its_tensors(runs):
    r = runs("base")
    order = forward(r["order"])
    sdpa = [k for k in order if "scaled_dot_product" in k]
    assert [re.sub(r"-op\d+$", "", k) for k in sdpa] == [
        f"{ATTN}/scaled_dot_product_attention",
        "Default/blocks-ModuleList/1-Block/attn-Attention/scaled_dot_product_attention"]
    # What it runs inside is nested in it: neither the CPU kernel nor the math path's
    # operators are kernels of the forward.
    inner = {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math",
             "softmax", "_softmax", "matmul", "bmm", "baddbmm", "empty_like"}
    types = {k.rsplit("/", 1)[1].rsplit("-op", 1)[0] for k in order}
    assert not types & inner, types & inner
    directory = r["base"] / "1"
    q, k, v = (one(f) for f in [kernel_files(directory, sdpa[0], "input", s)[0] for s in range(3)])
    out = kernel_files(directory, sdpa[0], "output")
    assert len(out) == 1 and len(kernel_files(directory, sdpa[0], "input")) == 3
    assert q.shape == k.shape == v.shape == (3, 2, 6, 8)
    # Its output is causal attention over its dumped inputs.
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    scores = q64 @ k64.swapaxes(-1, -2) / np.sqrt(8)
    scores[..., np.triu(np.ones((6, 6), dtype=bool), 1)] = -np.inf
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = (weights / weights.sum(-1, keepdims=True)) @ v64
    np.testing.assert_allclose(np.load(out[0]), expected, rtol=1e-5, atol=1e-6)
    # The next kernel reads exactly that output.
    after = order[order.index(sdpa[0]) + 1]
    assert after.startswith(f"{ATTN}/transpose-op")
    assert np.array_equal(np.load(out[0]), one(kernel_files(directory, after, "input", 0)[0]))
    # Its backward: the inner operator's autograd node, in the module's Gradients scope.
    assert any(re.fullmatch(rf"Gradients/{ATTN}/ScaledDotProduct\w*Backward\d*-op\d+", k)
               for k in r["order"]), [k for k in r["order"] if "Gradients/" + ATTN in k]


def test_rms_norm_is_one_kernel(runs):
    r = runs("base")
    order = forward(r["order"])
    assert any(re.fullmatch(r"Default/blocks-ModuleList/0-Block/norm-RMSNorm/rms_norm-op\d+", k)
               for k in order)
    functional = [k for k in order
                  if re.fullmatch(r"Default/blocks-ModuleList/0-Block/rms_norm-op\d+", k)]
    assert len(functional) == 1
    types = {k.rsplit("/", 1)[1].rsplit("-op", 1)[0] for k in order}
    assert not types & {"_fused_rms_norm", "pow", "mean", "rsqrt"}, types
    directory = r["base"] / "0"
    x = one(kernel_files(directory, functional[0], "input", 0)[0]).astype(np.float64)
    y = one(kernel_files(directory, functional[0], "output", 0)[0])
    eps = np.finfo(np.float32).eps  # rms_norm's eps=None
    np.testing.assert_allclose(y, x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps), rtol=1e-5,
                               atol=1e-6)


def test_autocast_kernels_read_float32_and_write_bfloat16(runs):
    r = runs("autocast")
    order = forward(r["order"])
    linears = [k for k in order if re.search(r"-Linear/linear-op\d+$", k)]
    assert len(linears) == 9  # qkv, proj, mlp.0, mlp.2 of both blocks, and the head
    directory = r["base"] / "0"
    for k in linears:
        assert [f.rsplit(".", 2)[1] for f in kernel_files(directory, k, "output")] == \
            ["bfloat16"], k
        # The script's float32 activations and parameters; autocast casts them inside.
        assert kernel_files(directory, k, "input", 1)[0].endswith(".float32.npy"), k
    in_modules = {k.rsplit("/", 1)[1].rsplit("-op", 1)[0] for k in order
                  if not k.startswith("Default/script/")}
    assert not in_modules & {"to", "_to_copy"}, in_modules
    # The loss is computed outside autocast from the bfloat16 prediction made float32.
    assert any(re.fullmatch(r"Default/script/to-op\d+", k) for k in order), order[-12:]
    assert any(k.startswith("Gradients/") and "Linear/" in k for k in r["order"])


def test_non_reentrant_checkpoint_recomputation_is_marked(runs):
    r = runs("checkpoint")
    order = r["order"]
    recomputed = [k for k in order if k.startswith("Recompute/")]
    again = {re.sub(r"-op\d+$", "", k[len("Recompute/"):]) for k in recomputed}
    plain = {re.sub(r"-op\d+$", "", k) for k in order if k.startswith("Default/blocks")}
    assert f"{ATTN}/scaled_dot_product_attention" in again
    assert "Default/blocks-ModuleList/1-Block/mlp-Sequential/1-GELU/gelu" in again
    assert again <= plain and len(again) > 20
    # A recomputed kernel computes what the forward computed, bit for bit.
    directory = r["base"] / "1"
    sdpa = next(k for k in order if k.startswith(f"{ATTN}/scaled_dot_product_attention-op"))
    redo = next(k for k in recomputed if f"{ATTN}/scaled_dot_product_attention-op" in k)
    assert np.array_equal(one(kernel_files(directory, sdpa, "output")[0]),
                          one(kernel_files(directory, redo, "output")[0]))


def test_checkpoint_stopping_its_recomputation_is_no_kernel_failure(tmp_path):
    # checkpoint(use_reentrant=False) stops recomputing once it has every saved tensor back by
    # raising inside the next operator (early stop, the default): op_debug_mode 4 dumps only
    # kernels that fail, and none does.
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"op_debug_mode": 4})
    run = graphdump("python", "--config", config, SCRIPT, "checkpoint", tmp_path / "o.npz",
                    check=0)
    assert "failed at" not in run.stderr, run.stderr
    assert not glob.glob(f"{tmp_path}/dump/rank_0/Net/0/*/*.npy")
    assert len(execution_order(tmp_path / "dump" / "rank_0")) > 100


@pytest.mark.parametrize("mode", ["foreach", "single"])
def test_optimizer_update_is_one_kernel_per_parameter(runs, mode):
    r = runs(mode)
    order = r["order"]
    updates = [k for k in order if k.startswith("Default/optimizer-Adam/")]
    names = [k.split("/")[2] for k in updates]
    assert len(names) == len(set(names)) == 20 and "blocks_0_attn_qkv_weight" in names
    assert all(re.fullmatch(r"Default/optimizer-Adam/\w+/Adam-op\d+", k) for k in updates)
    # The update's own operators (_foreach_mul_, addcmul_, lerp_...) are inside its kernels.
    types = {k.rsplit("/", 1)[1].rsplit("-op", 1)[0] for k in order if not k.startswith("Grad")}
    assert not [t for t in types if t.startswith("_foreach") or t.endswith("_")], types
    base = r["base"]
    for it in range(3):
        kernel = f"{base}/{it}/Adam.Default_optimizer-Adam_head_weight_Adam-op*"
        before, after = one(f"{kernel}.input.0.*.npy"), one(f"{kernel}.output.0.*.npy")
        assert np.array_equal(before, one(f"{base}/{it}/Parameter.head_weight.*.npy"))
        if it < 2:
            assert np.array_equal(after, one(f"{base}/{it + 1}/Parameter.head_weight.*.npy"))
        # Adam's state after the update: step, exp_avg, exp_avg_sq.
        assert len(glob.glob(f"{kernel}.output.*.npy")) == 4
    assert np.array_equal(after, r["dumped"]["head.weight"])
    _check_state_before_each_update(base)


def _check_state_before_each_update(base):
    """The state before an update (inputs 2-4: step, exp_avg, exp_avg_sq), which the update
    writes in place, is what the previous update left (its outputs 1-3); a call's files carry
    one timestamp."""
    for it in range(3):
        kernel = f"{base}/{it}/Adam.Default_optimizer-Adam_head_weight_Adam-op*"
        if it > 0:
            previous = f"{base}/{it - 1}/Adam.Default_optimizer-Adam_head_weight_Adam-op*"
            for slot in (1, 2, 3):
                assert np.array_equal(one(f"{kernel}.input.{slot + 1}.*.npy"),
                                      one(f"{previous}.output.{slot}.*.npy")), (it, slot)
        stamps = {os.path.basename(f).split(".")[4] for f in glob.glob(f"{kernel}.*.npy")}
        assert len(stamps) == 1, stamps


def test_an_asynchronous_dump_keeps_the_state_before_the_update(runs):
    r = runs("foreach", asynchronous=True)
    assert r["run"].returncode == 0, r["run"].stderr
    _check_state_before_each_update(r["base"])
    for key in r["plain"].files:
        assert np.array_equal(r["plain"][key], r["dumped"][key]), key


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_evaluation_forwards_are_dumped_without_backward(runs, mode):
    r = runs(mode)
    # Iteration 0: the first step's call; 1 and 2: the evaluation after the step before, then
    # the training call; 3: the last evaluation.
    assert global_order(r["rank"]) == [0, 1, 1, 2, 2, 3]
    head = next(k for k in r["order"] if k.startswith("Default/head-Linear/linear-op"))
    evaluation = kernel_files(r["base"] / "3", head, "output")
    assert len(evaluation) == 1 and not glob.glob(f"{r['base']}/3/*Gradients*")
    assert len(kernel_files(r["base"] / "1", head, "output")) == 2
    # The last evaluation's output is what the script summed.
    total = float(np.load(evaluation[0]).astype(np.float64).sum())
    assert total == pytest.approx(float(r["plain"]["losses"][-1]), rel=1e-5)


def test_a_forward_hook_of_the_script_runs_and_is_captured(runs):
    r = runs("forward_hook")
    order = forward(r["order"])
    mlp = "Default/blocks-ModuleList/0-Block/mlp-Sequential"
    hook = [k for k in order if re.fullmatch(rf"{mlp}/(mul|add)-op\d+", k)]
    assert [k.rsplit("/", 1)[1].split("-")[0] for k in hook] == ["mul", "add"], hook
    assert not [k for k in order if re.fullmatch(
        r"Default/blocks-ModuleList/1-Block/mlp-Sequential/(mul|add)-op\d+", k)]
    directory = r["base"] / "0"
    last_linear = next(k for k in order if k.startswith(f"{mlp}/2-Linear/linear-op"))
    linear_out = one(kernel_files(directory, last_linear, "output")[0])
    hooked = one(kernel_files(directory, hook[1], "output")[0])
    np.testing.assert_array_equal(hooked, linear_out * np.float32(0.5) + np.float32(1.0))
    # What the block adds to its input is the hook's result.
    residual = order[order.index(hook[1]) + 1]
    assert residual.startswith("Default/blocks-ModuleList/0-Block/add-op")
    assert np.array_equal(one(kernel_files(directory, residual, "input", 1)[0]), hooked)


def test_vmap_operators_are_kernels_with_their_batched_tensors_left_out(runs):
    r = runs("vmap")
    order = forward(r["order"])
    directory = r["base"] / "0"
    # The per-sample product inside torch.vmap: one kernel for the whole batch, its second
    # input SCALE (a plain tensor) dumped, its batched input and output (no storage of their
    # own: the operator computes on the batch nested inside it) said and left out.
    scale = np.linspace(0.5, 1.5, 6, dtype=np.float32)
    muls = [k for k in order if re.fullmatch(r"Default/script/mul-op\d+", k)]
    inside = [k for k in muls if kernel_files(directory, k, "input", 1)
              and one(kernel_files(directory, k, "input", 1)[0]).shape == (6,)]
    assert len(inside) == 1, (muls, r["run"].stderr)
    np.testing.assert_allclose(one(kernel_files(directory, inside[0], "input", 1)[0]), scale,
                               rtol=1e-6)
    assert kernel_files(directory, inside[0], "input", 0) == []
    assert kernel_files(directory, inside[0], "output") == []
    # Said once a run, at the first batched tensor (a library's masks are built this way in
    # every step), with a note that the others are not said.
    said = [line for line in r["run"].stderr.splitlines() if "torch.vmap" in line]
    assert said == [f"graphdump: warning: {inside[0]} input 0 is a tensor batched by torch.vmap, "
                    f"with no storage of its own (nor are the others inside torch.vmap, not said "
                    f"again): not dumped (its slot stays empty; docs/file-format.md)"], said
    # The kernel that sums each sample's products follows it, with nothing to dump but
    # batched tensors; what vmap returned is the input of the kernel after it.
    following = order[order.index(inside[0]) + 1]
    assert re.fullmatch(r"Default/script/sum-op\d+", following), order
    assert kernel_files(directory, following, "*") == []
    mean = order[order.index(following) + 1]
    assert re.fullmatch(r"Default/script/mean-op\d+", mean), order
    assert one(kernel_files(directory, mean, "input", 0)[0]).shape == (3,)
