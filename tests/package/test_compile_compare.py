"""`graphdump compare` of a torch.compile'd dump against an eager one (docs/analysis.md,
"Compiled against eager"): compiled_eager.py's bfloat16 model, dumped compiled and eager.

Its "shift" line adds and subtracts 64: eager rounds h + 64 to bfloat16 (a step of 0.5 there),
while Inductor fuses the line with the GELU before it into one kernel computing in float32, so
that kernel's output departs from eager's by far more than the bfloat16 standard allows (what
test_shift_departs measures on the files themselves); the layer norm and the first linear agree
within it. Checked here:
  - each compiled kernel is paired with the eager kernel whose value it stands for (>= 90% of
    them), the fusion of GELU and the shift with eager's sub of the shift line;
  - the first divergence is that fusion, at the shift line, with its fused operators and their
    lines, and it adds error (its input, the first linear's output, agrees);
  - the kernel after it inherits the error; eager's values the fusion never materialises (GELU's
    output, h + 64) are unpaired intermediates, not failures.
"""
import glob
import json
import os
import re

import numpy as np
import pytest

from conftest import HERE, execution_order, graphdump, marked_line, write_config

SCRIPT = os.path.join(HERE, "compiled_eager.py")


def script_line(marker):
    return marked_line(SCRIPT, marker)


def full_dumps(tmp_path_factory, folder, modes):
    """A full dump of the script in each of `modes`, each in a folder of its mode's name."""
    tmp = tmp_path_factory.mktemp(folder)
    for mode in modes:
        config = write_config(tmp / f"{mode}.json", tmp / mode, {"saved_data": "full"})
        graphdump("python", "--config", config, SCRIPT, mode, tmp / f"{mode}.npz", check=0,
                  timeout=600)
    return tmp


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return full_dumps(tmp_path_factory, "compile_compare", ("compiled", "eager"))


def compare(dumps, a, b):
    p = graphdump("compare", dumps / a, dumps / b, "--json")
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def compiled_kernels(rank):
    """Full names of the kernels of the graphs Inductor generated (graph 1 on)."""
    names = []
    for csv in sorted(glob.glob(str(rank / "execution_order" / "ms_execution_order_graph_*.csv"))):
        if csv.endswith("_graph_0.csv"):
            continue
        with open(csv) as f:
            names += [line.strip() for line in f.readlines()[1:] if line.strip()]
    return names


def shift_fusion(names):
    """The fusion of GELU and the shift: its last operator is the shift's sub."""
    found = [n for n in names if re.search(r"/FusionOp_\w*_sub-op\d+$", n)]
    assert len(found) == 1, names
    return found[0]


def kernel(result, name):
    found = [k for k in result["kernels"] if k["kernel_a"] == name]
    assert len(found) == 1, (name, [k["kernel_a"] for k in result["kernels"]])
    return found[0]


def output_file(rank, graph, full_name, slot):
    name = full_name.replace("/", "_")
    found = glob.glob(str(rank / "Net" / str(graph) / "0" / f"*.{name}.*.output.{slot}.*.npy"))
    assert len(found) == 1, (full_name, found)
    return np.load(found[0]).astype(np.float64).ravel()


def test_shift_departs(dumps):
    """The numerics the model is built on, measured on the dumped files: the compiled fusion of
    the shift line differs from eager's sub by far more than bfloat16's rtol (2**-8), the
    first linear's output by less."""
    compiled, eager = dumps / "compiled" / "rank_0", dumps / "eager" / "rank_0"
    names = compiled_kernels(compiled)
    fusion = shift_fusion(names)
    with open(eager / "execution_order" / "ms_execution_order_graph_0.csv") as f:
        eager_order = f.read().split()[1:]  # under the header
    sub = next(n for n in eager_order if n.rsplit("/", 1)[1].startswith("sub-op"))
    a, b = output_file(compiled, 1, fusion, 0), output_file(eager, 0, sub, 0)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) > 0.05
    up = next(n for n in names if n.startswith("Default/up-Linear/"))
    linear = next(n for n in eager_order if n.startswith("Default/up-Linear/"))
    a, b = output_file(compiled, 1, up, 0), output_file(eager, 0, linear, 0)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 2 ** -8


def test_compiled_against_eager(dumps):
    result = compare(dumps, "compiled", "eager")
    names = compiled_kernels(dumps / "compiled" / "rank_0")
    assert len(names) >= 4, names
    by_name = {k["kernel_a"]: k for k in result["kernels"]}
    paired = [n for n in names if n in by_name and by_name[n]["pairing"] == "stands-for"]
    assert len(paired) >= 0.9 * len(names), (names, sorted(by_name))

    shift, up = script_line("shift"), script_line("up")
    fusion = shift_fusion(names)
    k = kernel(result, fusion)
    assert k["kernel_b"].rsplit("/", 1)[1].startswith("sub-op"), k["kernel_b"]
    first = result["first_adding_error"]
    assert first is not None and first["kernel"] == fusion, first
    assert result["first_failure"]["kernel"] == fusion
    assert first["source_line"].endswith(f"compiled_eager.py:{shift}"), first
    assert first["reason"].startswith("adds error"), first["reason"]
    assert f"aten.sub.Tensor (compiled_eager.py:{shift})" in first["fused_ops"]
    assert f"aten.erf.default (compiled_eager.py:{up})" in first["fused_ops"]
    # Its input is the first linear's output, compared with eager linear's, and agrees.
    inputs = [t for t in k["tensors"] if t["io"] == "input"]
    assert inputs and all(t["verdict"] == "pass" for t in inputs), inputs
    assert k["verdict"] == "error"

    # The layer norm and the first linear agree; the second linear inherits the error.
    for n in names:
        if n.startswith("Default/norm-LayerNorm/") or n.startswith("Default/up-Linear/"):
            assert by_name[n]["verdict"] == "pass", by_name[n]
    down = kernel(result, next(n for n in names if n.startswith("Default/down-Linear/")))
    assert down["kernel_b"].startswith("Default/down-Linear/linear-op"), down["kernel_b"]
    assert down["reason"].startswith("inherits error"), down["reason"]
    assert fusion in down["reason"]  # the error was added upstream by the fusion

    # What the fusion never materialises is unpaired, as an intermediate.
    unpaired_b = {u["kernel"]: u.get("why", "") for u in result["unpaired"] if u["side"] == "B"}
    gelu = [n for n in unpaired_b if n.rsplit("/", 1)[1].startswith("gelu-op")]
    add = [n for n in unpaired_b if n.rsplit("/", 1)[1].startswith("add-op")]
    assert gelu and add, unpaired_b
    assert all(unpaired_b[n] == "intermediate" for n in gelu + add), unpaired_b

    text = graphdump("compare", dumps / "compiled", dumps / "eager").stdout
    assert f"first divergence: {fusion}" in text, text
    assert "fused operators: " in text and "an intermediate value" in text, text


def test_eager_against_compiled(dumps):
    """The eager dump as A: the same pairs seen from the other side."""
    result = compare(dumps, "eager", "compiled")
    first = result["first_adding_error"]
    assert first is not None and first["kernel"].rsplit("/", 1)[1].startswith("sub-op"), first
    assert first["reason"].startswith("adds error"), first["reason"]
    assert "aten.sub.Tensor" in first["fused_ops"]


# --- a bfloat16 compiled training step against float32 eager -----------------------------------

@pytest.fixture(scope="module")
def train_dumps(tmp_path_factory):
    return full_dumps(tmp_path_factory, "compile_compare_train", ("train-compiled", "train-eager32"))


def test_training_step_against_float32_eager(train_dumps):
    """Forward and backward kernels each paired with the eager kernel they stand for; the first
    divergence is the fusion of the unshift line, which adds error; kernels in the order they
    ran."""
    result = compare(train_dumps, "train-compiled", "train-eager32")
    rank = train_dumps / "train-compiled" / "rank_0"
    names = compiled_kernels(rank)
    by_name = {k["kernel_a"]: k for k in result["kernels"]}
    paired = [n for n in names if n in by_name and by_name[n]["pairing"] == "stands-for"]
    assert len(paired) >= 0.9 * len(names), (sorted(set(names) - set(paired)), names)
    backward = [n for n in names if n.startswith("Gradients/")]
    assert backward and all(n in paired for n in backward), (backward, paired)
    for n in backward:
        assert by_name[n]["kernel_b"].startswith("Gradients/"), by_name[n]

    # The first divergence: the fusion of the unshift and the GELU, standing for eager's GELU
    # (its last operator's line); its input, the up projection's output, carries no more than
    # bfloat16's rounding.
    unshift, act = script_line("unshift"), script_line("act")
    first = result["first_adding_error"]
    assert first is not None and "FusionOp_" in first["kernel"], first
    assert result["first_failure"]["kernel"] == first["kernel"]
    assert first["source_line"].endswith(f"compiled_eager.py:{act}"), first
    assert first["reason"].startswith("adds error"), first["reason"]
    assert f"aten.sub.Tensor (compiled_eager.py:{unshift})" in first["fused_ops"], first
    assert f"aten.erf.default (compiled_eager.py:{act})" in first["fused_ops"], first
    fusion = by_name[first["kernel"]]
    assert fusion["verdict"] == "error"
    assert fusion["kernel_b"].rsplit("/", 1)[1].startswith("gelu-op"), fusion["kernel_b"]
    inputs = [t for t in fusion["tensors"] if t["io"] == "input"]
    assert inputs and all(t["error"] < 2 ** -7 for t in inputs), inputs
    assert [t for t in fusion["tensors"] if t["io"] == "output"][0]["error"] > 0.1, fusion
    unpaired_b = {u["kernel"]: u.get("why") for u in result["unpaired"] if u["side"] == "B"}
    sub = [n for n in unpaired_b if n.rsplit("/", 1)[1].startswith("sub-op")]
    assert sub and all(unpaired_b[n] == "intermediate" for n in sub), unpaired_b
    # The up projection's backward: its input's gradient by a compiled mm, its weight's by
    # another, each with the eager autograd node's output of that shape.
    up = [n for n in backward if n.startswith("Gradients/Default/up-Linear/mm-op")]
    assert len(up) == 2, backward
    assert {by_name[n]["kernel_b"].rsplit("/", 1)[1].split("-op")[0] for n in up} == \
        {"AddmmBackward0", "TBackward0"}, [by_name[n]["kernel_b"] for n in up]

    # In the order they ran: the compiled forward (graph 1), the loss written in Python
    # (graph 0), the compiled backward (graph 2).
    order = [k["kernel_a"] for k in result["kernels"] if k["role"] == "operator"]
    graph = {n: 1 for n in execution_order(rank, 1)}
    graph.update({n: 2 for n in execution_order(rank, 2)})
    pow_at = next(i for i, n in enumerate(order) if n.rsplit("/", 1)[1].startswith("pow-op"))
    forward_at = [i for i, n in enumerate(order) if graph.get(n) == 1]
    backward_at = [i for i, n in enumerate(order) if graph.get(n) == 2]
    assert forward_at and backward_at
    assert max(forward_at) < pow_at < min(backward_at), order


@pytest.fixture(scope="module")
def branch_dumps(tmp_path_factory):
    return full_dumps(tmp_path_factory, "compile_branches", ("branch-compiled", "branch-eager32"))


def test_a_kernel_writing_two_buffers_pairs_each_with_its_eager_kernel(branch_dumps):
    """Inductor computes the gate and half lines in one kernel writing two buffers (the
    sigmoid's, the product's): each is compared with eager's kernel of its line, the first
    divergence is that kernel by its sigmoid's buffer (it adds error), and each linear after it
    compares the buffer it reads with the eager value that buffer holds."""
    result = compare(branch_dumps, "branch-compiled", "branch-eager32")
    rank = branch_dumps / "branch-compiled" / "rank_0"
    gate, half = script_line("gate"), script_line("half")
    names = compiled_kernels(rank)
    fusion = [n for n in names if re.search(r"/FusionOp_\w*sigmoid\w*-op\d+$", n)]
    assert len(fusion) == 1, names
    fusion = fusion[0]
    ir = (rank / "graphs" / "ms_output_trace_code_graph_1.ir").read_text()
    assert (f"output_ops: aten.sigmoid.default (compiled_eager.py:{gate}); "
            f"aten.mul.Tensor (compiled_eager.py:{half})") in ir, ir
    k = kernel(result, fusion)
    assert k["pairing"] == "stands-for", k
    outputs = {t["slot"]: t for t in k["tensors"] if t["io"] == "output"}
    assert sorted(outputs) == [0, 1], k["tensors"]
    eager = execution_order(branch_dumps / "branch-eager32" / "rank_0", 0)
    sigmoid = next(n for n in eager if re.search(r"/sigmoid-op\d+$", n))
    mul = next(n for n in eager if re.search(r"/mul-op\d+$", n))
    assert f".{sigmoid.replace('/', '_')}." in outputs[0]["path_b"], outputs[0]
    assert f".{mul.replace('/', '_')}." in outputs[1]["path_b"], outputs[1]
    # The values on the files: the sigmoid's near eager's (paired with another value, as h * 0.5
    # near 32, its error would be near 1) but beyond bfloat16's standard, the
    # product's within it.
    for slot, bound in ((0, 0.25), (1, 2 ** -8)):
        a = np.load(outputs[slot]["path_a"]).astype(np.float64).ravel()
        b = np.load(outputs[slot]["path_b"]).astype(np.float64).ravel()
        error = np.linalg.norm(a - b) / np.linalg.norm(b)
        assert error < bound and np.isclose(error, outputs[slot]["error"], rtol=1e-3), (
            slot, error, outputs[slot])
    assert outputs[0]["verdict"] == "error" and outputs[0]["error"] > 2 ** -6, outputs[0]
    # The product scales the linear's output by 0.5, exactly on both sides: its error is the
    # linear's, bfloat16's rounding of it.
    up = kernel(result, next(n for n in names if n.startswith("Default/up-Linear/")))
    up_output = [t for t in up["tensors"] if t["io"] == "output"]
    assert len(up_output) == 1 and np.isclose(outputs[1]["error"], up_output[0]["error"],
                                              rtol=1e-6), (outputs[1], up_output)
    first = result["first_adding_error"]
    assert first is not None and first["kernel"] == fusion, first
    assert result["first_failure"]["kernel"] == fusion, result["first_failure"]
    assert first["reason"].startswith("adds error"), first["reason"]
    for reader, slot in (("gate_out", 0), ("half_out", 1)):
        linear = next(n for n in names if n.startswith(f"Default/{reader}-Linear/"))
        read = [t for t in kernel(result, linear)["tensors"]
                if t["io"] == "input" and t["path_b"] == outputs[slot]["path_b"]]
        assert len(read) == 1, (reader, kernel(result, linear)["tensors"])
