"""A kernel first seen after the first backward pass has one name in a dump and in a run that
dumps nothing (docs/precision.md, "Kernel identity"; docs/python.md, "What a kernel is").

A dump captures the backward's and the optimizer's kernels; a precision run without a dump (each
round of bisect) captures neither. The kernels the script calls after loss.backward()
(clip_grad_norm_'s) were numbered after the backward kernels in the dump and right after the
forward's in the run, so the name a dump gave them (`Default/script/_foreach_norm-op18`)
matched no kernel of the run without a dump: `graphdump python --precision bf16 --keep-fp32
NAME` stopped with "matches no kernel that ran" (exit 2). The script's code numbers its kernels
apart from the host's (backward nodes, updates), so the dump's names are the run's.

Checked: the names are taken from a float32 statistic dump (its execution order after the first
Gradients/ kernel; the total norm's value in statistic.csv, read with pandas, is the value
clip_grad_norm_ returned to the script), given to `--keep-fp32` of a bf16 run without a dump,
which runs (exit 0), lists them among its kernels (run.json) with their op types, and computes
the kept total norm in float32 (the script prints its dtype and value, close to the float32
run's).
"""
import json
import os
import re
import sys

import numpy as np
import pandas as pd
import pytest

import gdtest as t
import precision_fixture as p

SCRIPT = '''
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 16)
y = torch.randn(64, 1)
for step in range(3):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    print("total", step, str(total.dtype), repr(float(total)))
'''


def printed_norms(out):
    """[(dtype, value)] of the gradients' total norms the script printed, by step."""
    found = re.findall(r"^total (\d) (\S+) (\S+)$", out, re.M)
    assert [int(s) for s, _, _ in found] == [0, 1, 2], out
    return [(dtype, float(value)) for _, dtype, value in found]


@pytest.fixture(scope="module")
def dumped(module_scratch):
    """(script, rank dir, execution order, stdout) of a float32 statistic dump of the script."""
    script = os.path.join(module_scratch, "clip_train.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    dump = os.path.join(module_scratch, "fp32")
    cfg = t.write_config(dump + ".json", dump, {"net_name": "Net", "iteration": "0",
                                                "saved_data": "statistic"})
    code, out, err = t.run("python", "--config", cfg, "--", script, env=p.ONE_THREAD)
    assert code == 0, err[-800:]
    rank = os.path.join(dump, "rank_0")
    return script, rank, p.kernel_names(rank), out


def after_backward(order, op_type):
    """The one kernel of `op_type` the script called after the dump's first backward kernel."""
    first = next(i for i, k in enumerate(order) if k.startswith("Gradients/"))
    names = [k for k in order[first:] if k.startswith("Default/script/") and
             re.fullmatch(rf"{op_type}-op\d+", k.rsplit("/", 1)[1])]
    assert len(names) == 1, (op_type, order)
    return names[0]


def test_names_after_backward_from_a_dump_match_a_run_without_one(module_scratch, dumped):
    script, rank, order, out = dumped
    # clip_grad_norm_: the gradients' norms, and their total norm (which it returns).
    norms = after_backward(order, "_foreach_norm")
    total = after_backward(order, "linalg_vector_norm")
    # The dump's kernel of that name computed the total the script printed (float32, step 0).
    # Data rows end with a comma (docs/file-format.md): no index column.
    stats = pd.read_csv(os.path.join(rank, "Net", "0", "0", "statistic.csv"), index_col=False)
    row = stats[(stats["Op Name"] == total.replace("/", "_")) & (stats["IO"] == "output")]
    assert len(row) == 1, stats["Op Name"].tolist()
    fp32 = printed_norms(out)
    assert all(dtype == "torch.float32" for dtype, _ in fp32), fp32
    np.testing.assert_allclose(row["Max Value"].iloc[0], fp32[0][1], rtol=1e-5)

    out_dir = os.path.join(module_scratch, "bf16")
    os.makedirs(out_dir, exist_ok=True)
    code, out, err = t.run("python", "--precision", "bf16", "--keep-fp32", norms, total, "--",
                           script, env={**p.ONE_THREAD, "GRAPHDUMP_PRECISION_OUT": out_dir})
    assert code == 0 and "matches no kernel" not in err, f"exit {code}\n{err[-1500:]}"
    with open(os.path.join(out_dir, "run.json")) as f:
        kernels = {k["full_name"]: k["op_type"] for k in json.load(f)["kernels"]}
    assert kernels.get(norms) == "_foreach_norm" and kernels.get(total) == "linalg_vector_norm", (
        norms, total, sorted(kernels))
    # Kept: the total norm of the bfloat16 gradients is computed in float32, near the float32
    # run's (the gradients differ by bfloat16 rounding and training in bfloat16).
    bf16 = printed_norms(out)
    assert all(dtype == "torch.float32" for dtype, _ in bf16), bf16
    np.testing.assert_allclose([v for _, v in bf16], [v for _, v in fp32], rtol=2e-2)


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
