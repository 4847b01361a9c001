"""A HuggingFace transformers model no one here wrote, trained by a plain loop and run unchanged
under `graphdump python` (hf_llama_train.py: a tiny LlamaForCausalLM from its config, random
weights, no download; SDPA attention, AdamW, clipping, 3 steps) against the same script run by
the plain Python: the trained parameters are bit-identical; kernels are named by the library's
module paths; the attention kernel is aten::scaled_dot_product_attention (its CPU backward
ScaledDotProductFlashAttentionForCpuBackward0) and computes what NumPy computes from its dumped
inputs; backward and optimizer kernels are named after the parameters; every statistic.csv row
is NumPy's reading of its .npy file; `graphdump ls` counts every file and row."""
import hashlib
import os
import re

import numpy as np
import pytest

import graphdump as gd
from conftest import HERE, execution_order, global_order, write_config
from hf_check import (ALL_CATEGORIES, check_statistics_against_numpy, dumped_python,
                      last_json_line, ls_totals, npy_files, plain_python, statistic_rows)

SCRIPT = os.path.join(HERE, "hf_llama_train.py")
STEPS = 3
LAYER = "Default/model-LlamaModel/layers-ModuleList/{}-LlamaDecoderLayer"
PARAMETERS = (["model.embed_tokens.weight"] +
              [f"model.layers.{i}.{p}.weight" for i in (0, 1)
               for p in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                         "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                         "input_layernorm", "post_attention_layernorm")] +
              ["model.norm.weight", "lm_head.weight"])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hf_llama")
    plain, plain_s = plain_python(SCRIPT, tmp / "plain.npz", "--steps", STEPS)
    config = write_config(tmp / "full.json", tmp / "dump",
                          {"saved_data": "full", "statistic_category": ALL_CATEGORIES})
    dumped, dumped_s = dumped_python(config, SCRIPT, tmp / "dumped.npz", "--steps", STEPS)
    rank = tmp / "dump" / "rank_0"
    print(f"hf_llama: plain {plain_s:.1f} s, graphdump python (full dump) {dumped_s:.1f} s")
    return {"tmp": tmp, "plain": plain, "dumped": dumped, "rank": rank,
            "order": execution_order(rank), "frame": gd.load(tmp / "dump")}


def one_file(frame, kernel, iteration, io, slot, call=0):
    rows = frame[(frame.kernel == kernel) & (frame.iteration == iteration) & (frame.io == io) &
                 (frame.slot == slot) & (frame.call == call)]
    assert len(rows) == 1, (kernel, iteration, io, slot, call, len(rows))
    return np.load(rows.file.iloc[0])


def named(order, pattern):
    """The kernels of the execution order that fully match `pattern` (-op{N} appended)."""
    return [k for k in order if re.fullmatch(pattern + r"-op\d+", k)]


def test_parameters_bit_identical_to_the_plain_run(run):
    plain, dumped = np.load(run["tmp"] / "plain.npz"), np.load(run["tmp"] / "dumped.npz")
    assert sorted(plain.files) == sorted(PARAMETERS)
    for key in PARAMETERS:
        assert np.array_equal(plain[key], dumped[key]), key
    assert last_json_line(run["dumped"].stdout)["losses"] == \
        last_json_line(run["plain"].stdout)["losses"]
    # Parameters (and the rotary embedding's buffer) are dumped at each step's start: each step
    # changed every parameter, and the last step's update made the saved values.
    frame = run["frame"]
    parameters = frame[frame.is_parameter]
    assert sorted(parameters.kernel.astype(str)) == sorted(
        [p.replace(".", "_") for p in PARAMETERS + ["model.rotary_emb.inv_freq"]] * STEPS)
    for key in PARAMETERS:
        values = [np.load(parameters.file[(parameters.kernel == key.replace(".", "_")) &
                                          (parameters.iteration == i)].iloc[0])
                  for i in range(STEPS)]
        assert all(not np.array_equal(a, b) for a, b in zip(values, values[1:] + [dumped[key]]))


def test_kernels_named_by_the_librarys_module_paths(run):
    order = run["order"]
    for i in (0, 1):
        layer = LAYER.format(i)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            assert len(named(order, f"{layer}/self_attn-LlamaAttention/{proj}-Linear/linear")) \
                == 1, (i, proj)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            assert len(named(order, f"{layer}/mlp-LlamaMLP/{proj}-Linear/linear")) == 1
        assert len(named(order, f"{layer}/mlp-LlamaMLP/act_fn-SiLUActivation/silu")) == 1
        for norm in ("input_layernorm", "post_attention_layernorm"):
            assert len(named(order, f"{layer}/{norm}-LlamaRMSNorm/rsqrt")) == 1
        # The residual additions of the decoder layer's own forward.
        assert len(named(order, f"{layer}/add")) == 2
    q = named(order, f"{LAYER.format(0)}/self_attn-LlamaAttention/q_proj-Linear/linear")[0]
    assert q.startswith("Default/model-LlamaModel/layers-ModuleList/0-LlamaDecoderLayer/"
                        "self_attn-LlamaAttention/q_proj-Linear/linear-op"), q
    assert named(order, "Default/model-LlamaModel/embed_tokens-Embedding/embedding") == \
        [order[0]]
    assert named(order, "Default/model-LlamaModel/rotary_emb-LlamaRotaryEmbedding/cos")
    assert named(order, "Default/model-LlamaModel/norm-LlamaRMSNorm/rsqrt")
    assert len(named(order, "Default/lm_head-Linear/linear")) == 1
    # The loss of LlamaForCausalLM.forward, and the script's own clipping outside any module.
    assert len(named(order, "Default/cross_entropy_loss")) == 1
    assert named(order, "Default/script/_foreach_norm")
    # Outermost calls only: linear, never the addmm/mm inside it; the attention's CPU kernel
    # is inside aten::scaled_dot_product_attention.
    forward = [k for k in order if not k.startswith("Gradients/")]
    assert not [k for k in forward if re.search(r"/(addmm|mm|_scaled_dot_product\w*)-op", k)]
    assert "unnamed" not in " ".join(order)


def test_attention_kernel_computes_what_numpy_computes(run):
    order, frame = run["order"], run["frame"]
    for i in (0, 1):
        scope = f"{LAYER.format(i)}/self_attn-LlamaAttention"
        sdpa = named(order, f"{scope}/scaled_dot_product_attention")
        assert len(sdpa) == 1, sdpa
        # On the CPU it dispatches to the flash attention kernel: that is its backward node.
        backward = f"Gradients/{scope}/ScaledDotProductFlashAttentionForCpuBackward0"
        assert len(named(order, backward)) == 1
        for iteration in range(STEPS):
            q, k, v = (one_file(frame, sdpa[0], iteration, "input", s).astype(np.float64)
                       for s in range(3))
            mask = one_file(frame, sdpa[0], iteration, "input", 3)
            out = one_file(frame, sdpa[0], iteration, "output", 0)
            assert q.shape == (2, 4, 16, 16) and mask.dtype == bool and mask.shape == (2, 1, 16, 16)
            # The batch's first sequence ends in 3 padding tokens, which no query attends to.
            assert not mask[0, 0, :, -3:].any() and mask[1, 0, -1].all()
            scores = np.where(mask, q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1]), -np.inf)
            weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
            expected = (weights / weights.sum(axis=-1, keepdims=True)) @ v
            np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_backward_kernels_named_after_parameters(run):
    order = run["order"]
    gradients = [k for k in order if k.startswith("Gradients/")]
    assert len(gradients) > 100
    accumulated = {m.group(1) for k in gradients
                   if (m := re.fullmatch(r"Gradients/.*/(\w+)/AccumulateGrad-op\d+", k))}
    assert accumulated == {p.replace(".", "_") for p in PARAMETERS}
    assert named(order, f"Gradients/{LAYER.format(0)}/self_attn-LlamaAttention/q_proj-Linear/"
                        "model_layers_0_self_attn_q_proj_weight/AccumulateGrad")
    assert named(order, "Gradients/Default/model-LlamaModel/embed_tokens-Embedding/"
                        "model_embed_tokens_weight/AccumulateGrad")
    assert named(order, f"Gradients/{LAYER.format(1)}/mlp-LlamaMLP/down_proj-Linear/MmBackward0")


def test_optimizer_kernels_named_after_parameters(run):
    order, frame = run["order"], run["frame"]
    updates = {m.group(1): k for k in order
               if (m := re.fullmatch(r"Default/optimizer-AdamW/(\w+)/AdamW-op\d+", k))}
    assert set(updates) == {p.replace(".", "_") for p in PARAMETERS}
    final = np.load(run["tmp"] / "dumped.npz")
    for name in PARAMETERS:
        kernel = updates[name.replace(".", "_")]
        # Output 0 of the last step is the parameter the script saved.
        assert np.array_equal(one_file(frame, kernel, STEPS - 1, "output", 0), final[name])
    # The gradient AdamW saw (input 1) is the accumulated gradient times clip_grad_norm_'s
    # coefficient (the scalar last input of its _foreach_mul_).
    clip = named(order, "Default/script/_foreach_mul_")
    assert len(clip) == 1
    q = "model_layers_0_self_attn_q_proj_weight"
    accumulate = named(order, f"Gradients/.*/{q}/AccumulateGrad")[0]
    for iteration in range(STEPS):
        coefficient = one_file(frame, clip[0], iteration, "input", len(PARAMETERS))
        assert coefficient.shape == () and 0 < coefficient < 1
        gradient = one_file(frame, accumulate, iteration, "input", 0)
        assert np.array_equal(one_file(frame, updates[q], iteration, "input", 1),
                              gradient * coefficient)
        # clip_grad_norm_'s input 0 is that gradient before it scaled it in place.
        assert np.array_equal(one_file(frame, clip[0], iteration, "input", 1), gradient)


def script_line(text):
    with open(SCRIPT, encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


def source_trace(rank, kernel):
    """The (file, line, code) frames graphs/*.ir records for `kernel`, innermost first."""
    with open(rank / "graphs" / "ms_output_trace_code_graph_0.ir", encoding="utf-8") as f:
        ir = f.read()
    block = ir[ir.index(f"# Fullname with scope: ({kernel})"):]
    block = block[:block.index("\n  %")]
    return re.findall(r"# In file (.*)\((\d+)\)/(.*)/$", block, re.M)


def test_source_trace_goes_through_the_library_to_the_script(run):
    order = run["order"]
    sdpa = named(order, f"{LAYER.format(1)}/self_attn-LlamaAttention/"
                        "scaled_dot_product_attention")[0]
    trace = source_trace(run["rank"], sdpa)
    # The kernel's line is transformers' (its SDPA integration), then the model's code ...
    assert trace[0][0].endswith(os.path.join("transformers", "integrations", "sdpa_attention.py"))
    assert "scaled_dot_product_attention(" in trace[0][2]
    files = [f for f, _, _ in trace]
    assert any(f.endswith(os.path.join("models", "llama", "modeling_llama.py")) for f in files)
    # ... and on to the script's call of the model.
    call = script_line("out = model(input_ids=ids")
    assert (SCRIPT, str(call), "out = model(input_ids=ids, attention_mask=mask, labels=labels)") \
        in trace, trace
    assert len(trace) <= 32


def test_one_call_and_one_iteration_per_step(run):
    assert global_order(run["rank"]) == list(range(STEPS))
    frame = run["frame"]
    assert sorted(frame.iteration[frame.iteration >= 0].unique()) == list(range(STEPS))
    assert frame.call.max() == 0


def test_statistics_are_numpys(run):
    checked, dtypes = check_statistics_against_numpy(run["rank"])
    assert checked > 3000 and {"float32", "int64", "bool"} <= dtypes, (checked, dtypes)


def test_ls_counts_every_file_and_row(run):
    total = ls_totals(run["tmp"] / "dump")
    assert total["files"] == len(npy_files(run["rank"]))
    assert total["statistic_rows"] == len(statistic_rows(run["rank"]))
    assert (total["graphs"], total["iterations"], total["ranks"]) == (1, STEPS, 1)
    assert total["tensors"] == total["statistic_rows"] and total["statistic_only"] == 0
    assert f"{total['files']} tensor files" in run["dumped"].stderr
    assert f"{total['statistic_rows']} statistic rows" in run["dumped"].stderr


def test_the_summary_says_how_many_tensors_were_read(run):
    """The end-of-run line gives how many tensors the statistic rows were computed from, and
    their bytes: at least one per distinct file content (two contents never share statistics),
    at most one per row, each read whole."""
    m = re.search(r"(\d+) statistic rows \((\d+) tensors summarised, ([\d.]+) (GiB|MiB|bytes) "
                  r"read\);", run["dumped"].stderr)
    assert m, run["dumped"].stderr[-2000:]
    rows, summarised = int(m[1]), int(m[2])
    files = npy_files(run["rank"])
    contents, data_bytes = set(), 0
    for path in files:
        with open(path, "rb") as f:
            contents.add(hashlib.sha1(f.read()).digest())
        data_bytes += np.load(path, mmap_mode="r").nbytes
    assert len(contents) <= summarised <= rows, (len(contents), summarised, rows)
    read = float(m[3]) * {"GiB": 1 << 30, "MiB": 1 << 20, "bytes": 1}[m[4]]
    # Every tensor summarised was read whole once; no more than all the files' data.
    assert 0 < read <= data_bytes * 1.01, (read, data_bytes)
