"""A HuggingFace transformers model trained by transformers.Trainer, run unchanged under
`graphdump python` (hf_llama_trainer.py: a tiny LlamaForCausalLM from its config, random
weights, no download; 2 optimizer steps of 2 accumulated micro-batches, gradient checkpointing
(transformers' default: reentrant torch.utils.checkpoint), a cosine schedule, AdamW, clipping,
on the CPU, saving nothing) against the same script run by the plain Python: the trained
parameters are bit-identical; each micro-batch is a call of the model and its checkpointed
layers' recomputation during backward is marked Recompute/, call by call; the optimizer kernels
are one update per parameter per step, at the schedule's learning rates; every statistic.csv
row is NumPy's reading of its .npy file; `graphdump ls` counts every file and row."""
import collections
import os
import re

import numpy as np
import pytest

import graphdump as gd
from conftest import HERE, execution_order, global_order, write_config
from hf_check import (ALL_CATEGORIES, check_statistics_against_numpy, dumped_python,
                      last_json_line, ls_totals, npy_files, plain_python, statistic_rows)

SCRIPT = os.path.join(HERE, "hf_llama_trainer.py")
STEPS, ACCUMULATION = 2, 2
LR, WEIGHT_DECAY = 1e-3, 0.01
LAYER = "Default/model-LlamaModel/layers-ModuleList/{}-LlamaDecoderLayer"
Q_PROJ = LAYER.format(0) + "/self_attn-LlamaAttention/q_proj-Linear/linear"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf_trainer")
    plain, plain_s = plain_python(SCRIPT, tmp / "plain.npz", "--steps", STEPS)
    config = write_config(tmp / "full.json", tmp / "dump",
                          {"saved_data": "full", "statistic_category": ALL_CATEGORIES})
    dumped, dumped_s = dumped_python(config, SCRIPT, tmp / "dumped.npz", "--steps", STEPS)
    rank = tmp / "dump" / "rank_0"
    print(f"hf_trainer: plain {plain_s:.1f} s, graphdump python (full dump) {dumped_s:.1f} s")
    return {"tmp": tmp, "plain": plain, "dumped": dumped, "rank": rank,
            "order": execution_order(rank), "frame": gd.load(tmp / "dump")}


def named(order, pattern):
    return [k for k in order if re.fullmatch(pattern + r"-op\d+", k)]


def rows(frame, kernel, io, slot):
    return frame[(frame.kernel == kernel) & (frame.io == io) & (frame.slot == slot)]


def one_file(frame, kernel, iteration, io, slot, call=0):
    found = rows(frame, kernel, io, slot)
    found = found[(found.iteration == iteration) & (found.call == call)]
    assert len(found) == 1, (kernel, iteration, io, slot, call, len(found))
    return np.load(found.file.iloc[0])


def test_parameters_bit_identical_to_the_plain_run(run):
    plain, dumped = np.load(run["tmp"] / "plain.npz"), np.load(run["tmp"] / "dumped.npz")
    assert len(plain.files) == 21
    for key in plain.files:
        assert np.array_equal(plain[key], dumped[key]), key
    losses = last_json_line(run["plain"].stdout)["losses"]
    assert len(losses) == STEPS and last_json_line(run["dumped"].stdout)["losses"] == losses


def test_each_micro_batch_is_a_call(run):
    assert global_order(run["rank"]) == [i for i in range(STEPS) for _ in range(ACCUMULATION)]
    frame = run["frame"]
    q = named(run["order"], Q_PROJ)
    assert len(q) == 1
    out = rows(frame, q[0], "output", 0)
    assert sorted(zip(out.iteration, out.call)) == [(i, c) for i in range(STEPS)
                                                   for c in range(ACCUMULATION)]
    # The two micro-batches of a step are different data.
    assert not np.array_equal(one_file(frame, q[0], 0, "output", 0, call=0),
                              one_file(frame, q[0], 0, "output", 0, call=1))


def test_recomputation_is_marked_call_by_call(run):
    order, frame = run["order"], run["frame"]
    strip = lambda k: re.sub(r"-op\d+$", "", k)  # noqa: E731
    forward = collections.Counter(strip(k) for k in order
                                  if k.startswith("Default/model-LlamaModel/layers-ModuleList/"))
    again = collections.Counter(strip(k)[len("Recompute/"):] for k in order
                                if k.startswith("Recompute/"))
    # Every kernel of both checkpointed layers is recomputed once per call, nothing else is.
    assert again == forward and sum(forward.values()) > 80
    assert named(order, "Recompute/" + LAYER.format(1) +
                 "/self_attn-LlamaAttention/scaled_dot_product_attention")
    assert named(order, "Gradients/Recompute/" + LAYER.format(1) +
                 "/self_attn-LlamaAttention/ScaledDotProductFlashAttentionForCpuBackward0")
    q = named(order, Q_PROJ)[0]
    recomputed = named(order, "Recompute/" + Q_PROJ)
    assert len(recomputed) == 1
    first = rows(frame, q, "output", 0)
    again = rows(frame, recomputed[0], "output", 0)
    assert sorted(zip(again.iteration, again.call)) == sorted(zip(first.iteration, first.call))
    for iteration in range(STEPS):
        stamps = []
        for call in range(ACCUMULATION):
            forward_out = one_file(frame, q, iteration, "output", 0, call)
            # The recomputation computes bit for bit what the micro-batch's forward computed.
            assert np.array_equal(one_file(frame, recomputed[0], iteration, "output", 0, call),
                                  forward_out)
            for kernel in (q, recomputed[0]):
                r = rows(frame, kernel, "output", 0)
                stamps.append(int(r.timestamp[(r.iteration == iteration) &
                                              (r.call == call)].iloc[0]))
        # Forward 0, its backward's recomputation, forward 1, its recomputation.
        assert stamps == sorted(stamps), stamps


def test_checkpoint_functions_named_where_they_were_applied(run):
    """Reentrant checkpointing is a Python autograd Function (CheckpointFunction), applied in
    LlamaModel.forward's loop over the layers (GradientCheckpointingLayer.__call__): its backward
    node, which no forward kernel made, is named there, not after the module whose gradient
    reaches it first (the final norm)."""
    order, frame = run["order"], run["frame"]
    checkpoints = [k for k in order if "CheckpointFunctionBackward" in k]
    assert len(checkpoints) == 2, checkpoints  # one per layer
    assert all(re.fullmatch(r"Gradients/Default/model-LlamaModel/CheckpointFunctionBackward-op\d+",
                            k) for k in checkpoints), checkpoints
    assert not [k for k in order if k.startswith("Gradients/Default/model-LlamaModel/norm-") and
                "Checkpoint" in k]
    # Layer 1's (the first backward reaches): its output is the gradient of the layer's input,
    # which the recomputation's backward accumulated into the detached input.
    leaf = named(order, f"Gradients/Recompute/{LAYER.format(1)}/AccumulateGrad")
    assert len(leaf) == 1
    for iteration in range(STEPS):
        for call in range(ACCUMULATION):
            np.testing.assert_array_equal(
                one_file(frame, checkpoints[0], iteration, "output", 0, call),
                one_file(frame, leaf[0], iteration, "input", 0, call))


def test_backward_and_optimizer_kernels_named_after_parameters(run):
    order, frame = run["order"], run["frame"]
    plain = np.load(run["tmp"] / "plain.npz")
    names = {k.replace(".", "_") for k in plain.files}
    accumulated = {m.group(1) for k in order
                   if (m := re.fullmatch(r"Gradients/.*/(\w+)/AccumulateGrad-op\d+", k))}
    assert names <= accumulated
    assert named(order, f"Gradients/{LAYER.format(0)}/self_attn-LlamaAttention/q_proj-Linear/"
                        "model_layers_0_self_attn_q_proj_weight/AccumulateGrad")
    updates = {m.group(1): k for k in order
               if (m := re.fullmatch(r"Default/optimizer-AdamW/(\w+)/AdamW-op\d+", k))}
    assert set(updates) == names
    for key in plain.files:
        update = rows(frame, updates[key.replace(".", "_")], "output", 0)
        # One update per parameter per optimizer step, not per micro-batch.
        assert sorted(zip(update.iteration, update.call)) == [(i, 0) for i in range(STEPS)]
        assert np.array_equal(one_file(frame, updates[key.replace(".", "_")], STEPS - 1,
                                       "output", 0), plain[key])


def _learning_rate(frame, kernel, iteration):
    """The learning rate AdamW used at `iteration` (torch's AdamW, betas 0.9 and 0.999, eps
    1e-8, weight decay 0.01), solved from the update kernel's inputs and outputs."""
    before, grad = (one_file(frame, kernel, iteration, "input", s).astype(np.float64)
                    for s in (0, 1))
    after = one_file(frame, kernel, iteration, "output", 0).astype(np.float64)
    step = float(one_file(frame, kernel, iteration, "output", 1))
    exp_avg, exp_avg_sq = (one_file(frame, kernel, iteration, "output", s).astype(np.float64)
                           for s in (2, 3))
    if iteration == 0:
        np.testing.assert_allclose(exp_avg, 0.1 * grad, rtol=1e-5, atol=1e-12)
    assert step == iteration + 1
    direction = (exp_avg / (1 - 0.9 ** step)) / (np.sqrt(exp_avg_sq / (1 - 0.999 ** step)) +
                                                 1e-8)
    direction += WEIGHT_DECAY * before
    big = np.abs(direction) > 1e-3
    return np.median((before - after)[big] / direction[big])


def test_updates_follow_the_cosine_schedule(run):
    frame = run["frame"]
    kernel = named(run["order"], "Default/optimizer-AdamW/model_layers_0_self_attn_q_proj_weight/"
                                 "AdamW")[0]
    # Cosine without warm-up over 2 steps: the full rate, then half of it.
    rates = [_learning_rate(frame, kernel, i) for i in range(STEPS)]
    np.testing.assert_allclose(rates, [LR, LR / 2], rtol=1e-3)
    # load() gives each update its group's hyperparameters at its step (recorded in
    # graphs/hyperparameters.jsonl): Trainer's two groups, weights with decay and the norms'
    # without, at the schedule's rates.
    norm = named(run["order"], "Default/optimizer-AdamW/model_layers_0_input_layernorm_weight/"
                               "AdamW")[0]
    for name, group, decay in ((kernel, 0, WEIGHT_DECAY), (norm, 1, 0.0)):
        update = rows(frame, name, "output", 0).sort_values("iteration")
        assert list(update.iteration) == list(range(STEPS))
        assert list(update.param_group) == [group] * STEPS, name
        np.testing.assert_allclose(update.lr, [LR, LR / 2], rtol=1e-12)
        assert list(update.weight_decay) == [decay] * STEPS, name
        assert set(update.betas) == {(0.9, 0.999)}


def test_source_trace_goes_through_trainer_to_the_script(run):
    """A kernel of the model records transformers' line and, through Trainer's loop, the
    script's line that started the training."""
    with open(run["rank"] / "graphs" / "ms_output_trace_code_graph_0.ir", encoding="utf-8") as f:
        ir = f.read()
    q = named(run["order"], Q_PROJ)[0]
    block = ir[ir.index(f"# Fullname with scope: ({q})"):]
    block = block[:block.index("\n  %")]
    trace = re.findall(r"# In file (.*)\((\d+)\)/(.*)/$", block, re.M)
    # nn.Linear's own line (torch's), then the model's: the kernel's line.
    assert trace[0][0].endswith(os.path.join("torch", "nn", "modules", "linear.py"))
    assert trace[1][0].endswith(os.path.join("models", "llama", "modeling_llama.py"))
    assert "self.q_proj(hidden_states)" in trace[1][2]
    assert any(f.endswith(os.path.join("transformers", "trainer.py")) for f, _, _ in trace)
    with open(SCRIPT, encoding="utf-8") as f:
        line = next(n for n, text in enumerate(f, 1) if "trainer.train()" in text)
    assert (SCRIPT, str(line), "trainer.train()") in trace, trace


def test_statistics_are_numpys(run):
    checked, dtypes = check_statistics_against_numpy(run["rank"])
    assert checked > 4000 and {"float32", "int64", "bool"} <= dtypes, (checked, dtypes)


def test_ls_counts_every_file_and_row(run):
    total = ls_totals(run["tmp"] / "dump")
    assert total["files"] == len(npy_files(run["rank"]))
    assert total["statistic_rows"] == len(statistic_rows(run["rank"]))
    assert (total["graphs"], total["iterations"], total["ranks"]) == (1, STEPS, 1)
    assert total["tensors"] == total["statistic_rows"] and total["statistic_only"] == 0
    assert f"{total['statistic_rows']} statistic rows" in run["dumped"].stderr
