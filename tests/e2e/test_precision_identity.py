"""Kernel identity that does not depend on precision (docs/precision.md, "Kernel identity"): a
training script with `.to(dtype)`, `.float()`, `.type_as()` and an autocast region in its model,
`.to()` of the output in its loop, a loss computed by a kernel that can be kept in float32 and
clip_grad_norm_ over its gradients. Whatever a bfloat16 run keeps in float32 (nothing, the loss's
kernels, one parameter, everything), it names every kernel as its float32 dump does and calls
the same kernels in the same order:
  - keeping the loss's `div` makes the loss float32 while autograd's seed gradient (its
    `ones_like`) would be bfloat16, so the engine casts it: that cast, and the `ones_like`, are
    autograd's work inside `loss.backward()`, never kernels;
  - keeping one parameter gives it a float32 gradient among bfloat16 ones, which
    clip_grad_norm_ would group apart (two `_foreach_norm` calls instead of one).
Either renumbered every kernel after it, so bisect stopped at a round with "kernels changed
between rounds". The bisection of the script completes."""
import json
import os
import sys

import pytest

import gdtest as t
import precision_fixture as p

SCRIPT = '''
import torch, torch.nn as nn
torch.manual_seed(0)

class Pos(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = nn.Parameter(torch.linspace(0.5, 2.0, 8))
        self.head = nn.Linear(8, 1)

    def forward(self, mask):
        pos = torch.cumsum(mask, dim=0).to(self.freqs.dtype)
        angle = pos.unsqueeze(1).float() * self.freqs
        feats = torch.sin(angle).type_as(mask)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.head(feats)
        return h.float().squeeze(1)

model = Pos()
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
mask = torch.ones(512)
target = torch.zeros(512)
for step in range(3):
    out = model(mask).to(torch.float32)
    loss = ((out - target.to(out.dtype)) ** 2).sum() / 512
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    print("loss", step, loss.item())
'''

# Nothing; the loss's kernels (a float32 loss); one parameter (a float32 gradient among
# bfloat16 ones); everything.
KEEP = [[], ["div", "sum", "pow"], ["head.bias"],
        ["name-regex(.*)", "freqs", "head.weight", "head.bias"]]


@pytest.fixture(scope="module")
def script(module_scratch):
    path = os.path.join(module_scratch, "pos_train.py")
    with open(path, "w") as f:
        f.write(SCRIPT)
    return path


def precision_kernels(work, script, case, keep):
    out_dir = os.path.join(work, f"run_{case}")
    os.makedirs(out_dir, exist_ok=True)
    options = ["--precision", "bf16"] + (["--keep-fp32", *keep] if keep else [])
    code, out, err = t.run("python", *options, "--", script,
                           env={**p.ONE_THREAD, "GRAPHDUMP_PRECISION_OUT": out_dir})
    assert code == 0, f"--keep-fp32 {keep}: exit {code}\n{err[-1500:]}"
    assert len([l for l in out.splitlines() if l.startswith("loss")]) == 3, out
    with open(os.path.join(out_dir, "run.json")) as f:
        return [k["full_name"] for k in json.load(f)["kernels"]]


def test_every_kept_set_names_the_kernels_of_the_float32_dump(module_scratch, script):
    dump = os.path.join(module_scratch, "fp32")
    cfg = t.write_config(dump + ".json", dump, {"net_name": "Net", "iteration": "0",
                                                "saved_data": "statistic"})
    code, _, err = t.run("python", "--config", cfg, "--", script, env=p.ONE_THREAD)
    assert code == 0, err[-800:]
    order = p.kernel_names(os.path.join(dump, "rank_0"))
    # autograd's own work inside loss.backward() is no kernel of the script.
    assert not [k for k in order if k.startswith("Default/") and "/ones_like-op" in k], order
    runs = [precision_kernels(module_scratch, script, case, keep)
            for case, keep in enumerate(KEEP)]
    first = runs[0]
    assert len(first) >= 12, first
    assert [k for k in first if "/_foreach_norm-op" in k], first  # clip_grad_norm_ is there
    for keep, kernels in zip(KEEP, runs):
        assert kernels == first, (
            f"--keep-fp32 {keep} calls or names its kernels otherwise than the run keeping "
            f"nothing: {[(a, b) for a, b in zip(first, kernels) if a != b][:3]}, "
            f"{len(kernels)} vs {len(first)} kernels")
    # The kernels of the first forward pass (all before the dump's first backward node) are
    # the float32 dump's kernels of those names, in its order.
    before_backward = order[:next(i for i, k in enumerate(order) if k.startswith("Gradients/"))]
    dumped = [k for k in before_backward if k in set(first)]
    assert len(dumped) >= 8 and dumped == first[:len(dumped)], (dumped, first)


def test_bisect_of_the_script_completes(module_scratch, script):
    code, out, err = t.run("bisect", "--precision", "bf16", "--steps", "2", "--json", "--",
                           script, env={**p.ONE_THREAD, "TMPDIR": module_scratch})
    assert code in (0, 1), f"bisect: exit {code}\n{err[-1500:]}"
    result = json.loads(out)
    assert result["outcome"] in ("found", "unreachable"), result
    assert "changed between rounds" not in err, err[-1500:]
    names = [k["full_name"] for k in result["keep"]]
    assert not [n for n in names if n.startswith("Gradients/") or "ones_like" in n], names
    assert len(result["rounds"]) >= 4, result["rounds"]


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
