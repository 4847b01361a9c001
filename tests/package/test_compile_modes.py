"""The dump's condition modes on torch.compile'd kernels (docs/compile.md): the exception dump
(op_debug_mode 4) keeps the inputs of the generated kernel that raised, and the overflow dump
(op_debug_mode 3) only the kernels whose outputs hold NaN or Inf.
"""
import glob
import os
import re

import numpy as np

from conftest import HERE, execution_order, graphdump, marked_line, python, write_config

SCRIPT = os.path.join(HERE, "compiled_train.py")


def npy_files(root):
    return sorted(os.path.relpath(f, root)
                  for f in glob.glob(os.path.join(str(root), "Net", "*", "*", "*.npy")))


def last_line(stderr):
    """The script's exception as Python printed it last, the generated code's path left out
    (Inductor's C++ file differs between runs)."""
    line = stderr.strip().splitlines()[-1]
    return re.sub(r"/\S+\.cpp:\d+", "FILE", line)


def test_exception_mode_dumps_the_inputs_of_the_generated_kernel_that_raised(tmp_path):
    """Step 2's ids hold a token out of the vocabulary: the compiled forward's embedding kernel
    (a generated C++ kernel) raises at its bounds check, uncaught. The dump holds exactly that
    kernel's inputs as the step fed them, the script ends with PyTorch's own exception, and no
    kernel that ran normally is dumped."""
    plain = python(SCRIPT, "fail", tmp_path / "plain.npz", check=1)
    config = write_config(tmp_path / "exc.json", tmp_path / "dump", {"op_debug_mode": 4})
    run = graphdump("python", "--config", config, SCRIPT, "fail", tmp_path / "fed.npz",
                    check=1)
    assert "index out of bounds" in plain.stderr, plain.stderr
    assert last_line(run.stderr) == last_line(plain.stderr), run.stderr
    assert last_line(run.stderr).startswith("RuntimeError: "), run.stderr
    rank = tmp_path / "dump" / "rank_0"
    forward = execution_order(rank, 1)
    kernel = next(k for k in forward if "embedding" in k)
    assert re.fullmatch(r"Default/embed-Embedding/embedding-op0", kernel), forward
    lookup = marked_line(SCRIPT, "lookup")
    assert re.search(rf"graphdump: kernel {kernel} \(cpp_fused_embedding_0\) failed at "
                     rf"\S*compiled_train.py:{lookup} ", run.stderr), run.stderr
    marker = (rank / ".dump_metadata" / "INCOMPLETE").read_text()
    assert "index out of bounds" in marker and f"kernel {kernel} (" in marker, marker
    # Only the failing kernel's two inputs, in iteration 2 (steps 0 and 1 ran normally).
    name = kernel.replace("/", "_")
    files = npy_files(rank)
    assert [re.sub(r"\.\d+\.(input\.\d)\.", r".T.\1.", f) for f in files] == [
        f"Net/1/2/embedding.{name}.0.0.T.input.0.DefaultFormat.int64.npy",
        f"Net/1/2/embedding.{name}.0.0.T.input.1.DefaultFormat.float32.npy"], files
    fed = np.load(tmp_path / "fed.npz")  # what step 2 fed the compiled forward
    ids, weight = (np.load(rank / f) for f in files)
    assert ids.min() >= 0 and ids.max() == 11
    np.testing.assert_array_equal(ids, fed["ids"])
    np.testing.assert_array_equal(weight, fed["weight"])


def test_overflow_mode_dumps_only_compiled_kernels_that_make_nan(tmp_path):
    """Step 2's batch makes a NaN in the gate's fused kernel: that kernel is the first dumped,
    with its inputs and outputs, and every kernel dumped has a non-finite output; steps 0 and 1
    dump nothing."""
    config = write_config(tmp_path / "ovf.json", tmp_path / "dump", {"op_debug_mode": 3})
    graphdump("python", "--config", config, SCRIPT, "nan", tmp_path / "out.npz", check=0)
    plain = python(SCRIPT, "nan", tmp_path / "plain.npz", check=0)
    a, b = np.load(tmp_path / "out.npz"), np.load(tmp_path / "plain.npz")
    assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in b.files)
    rank = tmp_path / "dump" / "rank_0"
    files = npy_files(rank)
    assert files and all(re.match(r"Net/\d+/2/", f) for f in files), files
    kernels = {}
    for f in files:
        parts = os.path.basename(f).split(".")
        kernels.setdefault((f.split("/")[1], parts[1]), []).append((parts[5], np.load(rank / f)))
    for key, tensors in kernels.items():
        assert any(io == "output" and not np.isfinite(t).all() for io, t in tensors), key
    gate = [k for k in kernels if re.fullmatch(r"Default_FusionOp_log_mul_add-op\d+", k[1])]
    assert len(gate) == 1 and gate[0][0] != "0", kernels.keys()
    tensors = kernels[gate[0]]
    inputs = [t for io, t in tensors if io == "input"]
    # The planted negative feature is among its inputs; its output's first NaN is there too.
    assert [t for t in inputs if t.size == 4 * 6 * 16 and t.reshape(4, 6, 16)[1, 2, 0] == -1.0]
    assert all(np.isfinite(t).all() for t in inputs)
    out = next(t for io, t in tensors if io == "output").reshape(4, 6, 16)
    assert np.isnan(out[1, 2]).all() and np.isnan(out).sum() == 16
    # The forward's other kernels (the linear layer) made no NaN: not dumped.
    forward = execution_order(rank, int(gate[0][0]))
    assert len(forward) > 1 and len({k for k in kernels if k[0] == gate[0][0]}) == 1, forward
