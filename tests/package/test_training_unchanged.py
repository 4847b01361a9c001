"""The training is never changed (docs/reliability.md): less common uses of PyTorch under
`graphdump python` compute and raise exactly what plain python does (user_unusual.py), and
what the dump cannot hold (sparse tensors) is said, not hidden by renumbering."""
import glob
import json
import os
import re

import numpy as np

from conftest import HERE, graphdump, python, write_config

SCRIPT = os.path.join(HERE, "user_unusual.py")


def _both(tmp_path, mode, ext, common=None):
    """Runs MODE plainly and under `graphdump python`; returns (plain out, dumped out, the
    graphdump run, the rank directory)."""
    plain, dumped = tmp_path / f"plain.{ext}", tmp_path / f"dumped.{ext}"
    python(SCRIPT, mode, plain, check=0)
    config = write_config(tmp_path / "d.json", tmp_path / "dump", common)
    run = graphdump("python", "--config", config, SCRIPT, mode, dumped)
    assert run.returncode == 0, run.stderr
    return plain, dumped, run, tmp_path / "dump" / "rank_0"


def test_backward_of_a_generator_computes_the_gradients(tmp_path):
    plain, dumped, _, rank = _both(tmp_path, "generator", "npz")
    plain, dumped = np.load(plain), np.load(dumped)
    assert len(plain.files) == 4
    for key in plain.files:
        assert plain[key].shape != (0,) and np.array_equal(plain[key], dumped[key]), key
    # And the backward pass was dumped: the gradient reaching the first layer's weight.
    grad = _one(f"{rank}/Net/0/0/AccumulateGrad.Gradients_Default_0-Linear_0_weight_"
                "AccumulateGrad-op*.input.0.*.npy")
    assert np.array_equal(grad, plain["0.weight"])


def test_the_script_sees_the_exceptions_plain_python_raises(tmp_path):
    plain, dumped, run, rank = _both(tmp_path, "errors", "json", {"op_debug_mode": 4})
    plain, dumped = json.loads(plain.read_text()), json.loads(dumped.read_text())
    assert plain["kernel"]["str"].startswith("mat1 and mat2 shapes cannot be multiplied")
    assert plain["value"]["str"] == "an unrelated value error"
    assert dumped == plain
    # graphdump's own context goes to its log: the kernel that failed and the script's line,
    # once, for the exception that left the module; nothing for the one caught inside a module
    # (op_debug_mode 4 says "kernel ... failed; dumping its inputs" for each, as it dumps them).
    failed = [line for line in run.stderr.splitlines() if line.startswith("graphdump: kernel ")
              and "dumping its inputs" not in line]
    assert len(failed) == 1, run.stderr
    assert re.match(r"graphdump: kernel Default/matmul-op0 \(aten::matmul\) failed at "
                    r"\S*user_unusual.py:\d+ `return x @ x", failed[0]), failed
    # op_debug_mode 4 dumps the failing kernel's inputs.
    assert len(glob.glob(f"{rank}/Net/0/*/matmul.Default_matmul-op0.*.input.*.npy")) == 2


def _one(pattern):
    files = glob.glob(pattern)
    assert len(files) == 1, (pattern, files)
    return np.load(files[0])


def test_sparse_tensors_are_skipped_with_a_warning_and_keep_the_slots(tmp_path):
    plain, dumped, run, rank = _both(tmp_path, "sparse", "npz")
    plain, dumped = np.load(plain), np.load(dumped)
    for key in plain.files:
        assert np.array_equal(plain[key], dumped[key]), key
    net = rank / "Net" / "0"
    kernel = "SparseAdam.Default_optimizer-SparseAdam_weight_SparseAdam-op*"
    for it in (1, 2):
        # SparseAdam's update: input 0 the weight, 1 its (sparse) gradient, 2 and 3 exp_avg
        # and exp_avg_sq before; outputs the weight, exp_avg and exp_avg_sq after.
        assert not glob.glob(f"{net}/{it}/{kernel}.input.1.*"), it
        for slot_in, slot_out in ((0, 0), (2, 1), (3, 2)):
            before = _one(f"{net}/{it}/{kernel}.input.{slot_in}.*.npy")
            after = _one(f"{net}/{it - 1}/{kernel}.output.{slot_out}.*.npy")
            assert np.array_equal(before, after), (it, slot_in)
    assert np.array_equal(_one(f"{net}/2/{kernel}.output.0.*.npy"), plain["weight"])
    # The sparse gradient reaching the weight's AccumulateGrad is skipped too.
    assert not glob.glob(f"{net}/0/AccumulateGrad.*.input.0.*")
    # torch.sparse.mm(sparse, dense) inside a module: input 0 skipped, input 1 the dense one.
    product = glob.glob(f"{rank}/Net/1/*/_sparse_mm.*.npy")
    assert not [f for f in product if ".input.0." in f], product
    dense = [f for f in product if ".input.1." in f]
    assert len(dense) == 1 and np.array_equal(np.load(dense[0]), plain["dense"]), product
    outputs = [f for f in product if ".output.0." in f]
    assert len(outputs) == 1 and np.array_equal(np.load(outputs[0]), plain["product"])
    # Each skipped tensor is said once, naming the kernel, the slot and why.
    warnings = [line for line in run.stderr.splitlines() if "sparse" in line]
    update = [w for w in warnings if "SparseAdam-op" in w]
    assert len(update) == 1 and "input 1" in update[0] and "warning" in update[0], warnings
    assert any("_sparse_mm-op" in w and "input 0" in w for w in warnings), warnings
    assert any("AccumulateGrad" in w and "input 0" in w for w in warnings), warnings
