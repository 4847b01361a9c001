"""A precision run never changes whether the training runs (docs/precision.md, "What a precision
run casts"): on small training scripts of the kinds users write (a top-1 mixture of experts
routing with softmax, topk and index_add_ into a buffer, masked attention, a GRU, a
positional encoding with `.to(dtype)` calls in the script), `graphdump python --precision bf16`
runs with every --keep-fp32 set tried, with and without a tensor dump, and a tensor dump does
not change the losses it prints; scripts that resize tensors in place, load checkpoints, feed a
DataLoader with workers, step LBFGS with a closure or train in a second thread run as plain
python runs them. Kernel identity (docs/precision.md, "Bisecting a script"): every precision
run of a script names its kernels as the float32 dump names its forward kernels, whatever is
kept, and holds no operator autograd ran inside backward; bisect of the MoE and of the
positional-encoding script completes."""
import glob
import json
import math
import os
import subprocess
import sys

import pytest

import gdtest as t
import precision_fixture as p

MOE = '''
import torch, torch.nn as nn
torch.manual_seed(0)

class MoE(nn.Module):
    def __init__(self, d=16, experts=4):
        super().__init__()
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(experts))

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        gate, choice = torch.topk(probs, 1, dim=-1)
        out = torch.zeros(x.shape, dtype=torch.float32)
        for e, expert in enumerate(self.experts):
            rows = (choice[:, 0] == e).nonzero().squeeze(1)
            out.index_add_(0, rows, expert(x[rows]) * gate[rows])
        extra = torch.zeros(x.shape[0])
        extra.scatter_add_(0, choice[:, 0], gate[:, 0])
        return out + extra.unsqueeze(1)

model = MoE()
opt = torch.optim.SGD(model.parameters(), lr=0.5)
x = torch.randn(64, 16)
y = torch.randn(64, 16)
for step in range(3):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, loss.item())
'''

ATTN = '''
import torch, torch.nn as nn
torch.manual_seed(0)

class Attn(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.register_buffer("acc", torch.zeros(d))

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / 4.0
        scores = scores.masked_fill(~mask, float("-inf"))
        y = self.out(torch.softmax(scores, dim=-1) @ v)
        self.acc.copy_(y.detach().mean(dim=(0, 1)))
        return y

model = Attn()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(2, 8, 16)
mask = torch.tril(torch.ones(8, 8, dtype=torch.bool))
total = torch.zeros(())
for step in range(3):
    loss = model(x, mask).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    total.add_(loss.detach())
    print("loss", step, loss.item(), total.item())
'''

GRU = '''
import torch, torch.nn as nn
torch.manual_seed(0)

class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.head(h)

model = Seq()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 6, 8)
y = torch.randint(0, 4, (4, 6))
for step in range(3):
    loss = nn.functional.cross_entropy(model(x).reshape(-1, 4), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, loss.item())
'''

# `.to(...)` calls in the model and in the script: a no-op in one run, a cast in another.
POS = '''
import torch, torch.nn as nn
torch.manual_seed(0)

class Pos(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = nn.Parameter(torch.linspace(0.5, 2.0, 8))
        self.head = nn.Linear(8, 1)

    def forward(self, mask):
        pos = torch.cumsum(mask, dim=0).to(self.freqs.dtype)
        angle = pos.unsqueeze(1) * self.freqs
        return self.head(torch.sin(angle).to(torch.float32)).squeeze(1)

model = Pos()
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
mask = torch.ones(512)
target = torch.zeros(512)
for step in range(3):
    out = model(mask).to(torch.float32)
    loss = ((out - target) ** 2).sum() / 512
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, loss.item())
'''

# What plain python runs: resizing in-place operators, a DataLoader with workers, torch.load
# after a module ran, LBFGS's closure, a second thread training its own model.
ODD = '''
import io, threading, torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for i, (x, y) in enumerate(DataLoader(data, batch_size=4, num_workers=2)):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print("batch", i)
buf = io.BytesIO()
torch.save(model.state_dict(), buf)
buf.seek(0)
state = torch.load(buf)
model.load_state_dict(state)
print("loaded", sorted(state))
a = torch.empty(0)
a.resize_(3, 2).fill_(1.0)
b = torch.empty(0)
b.set_(torch.ones(5))
c = torch.empty(0)
torch.add(torch.ones(4), torch.ones(4), out=c)
print("resize", a.sum().item(), b.sum().item(), c.sum().item(), tuple(c.shape))
lbfgs = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)
x, y = data.tensors
def closure():
    lbfgs.zero_grad()
    l = ((model(x) - y) ** 2).mean()
    l.backward()
    return l
print("lbfgs", math.isfinite(lbfgs.step(closure).item()))
def work():
    m = nn.Linear(4, 1)
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(2):
        l = m(torch.randn(8, 4)).pow(2).mean()
        o.zero_grad(); l.backward(); o.step()
    print("thread", math.isfinite(l.item()))
t = threading.Thread(target=work); t.start(); t.join()
'''.replace("import io,", "import io, math,")

# Control flow that follows the values: in bfloat16 the sum is positive and cos runs; with sin
# kept in float32 it is negative and cos does not run (x holds multiples of 1/64, exact in
# bfloat16).
BRANCH = '''
import torch, torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        a = torch.sin(x * 1000.0)
        if a.sum().item() > 0:
            a = torch.cos(a)
        return a * 2.0

Net()(torch.arange(64) / 64.0)
'''

SCRIPTS = {"moe": MOE, "attn": ATTN, "gru": GRU, "pos": POS}

# --keep-fp32 sets of the kinds compare's float32 chains and bisect's results name: a chain
# with its parameters, single kernels by op type, the kernels writing into buffers, everything.
KEEP = {
    "moe": [[], ["name-regex(Default/router-Linear/.*)", "softmax", "topk", "router.weight",
                 "router.bias"],
            ["index_add", "scatter_add", "mul"], ["name-regex(.*)"]],
    "attn": [["softmax", "masked_fill", "copy_"]],
    "gru": [["gru"], ["name-regex(.*)"]],
    "pos": [["cumsum", "mul", "sin", "freqs"]],
}


def write(work, name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def losses(out):
    return [l for l in out.splitlines() if l.startswith("loss")]


@pytest.fixture(scope="module")
def scripts(module_scratch):
    return {name: write(module_scratch, name + ".py", text) for name, text in SCRIPTS.items()}


def precision_run(work, script, keep, dump_name=None, out_dir=None):
    """graphdump python --precision bf16 [--keep-fp32 KEEP] [--config tensor dump] SCRIPT."""
    options = ["--precision", "bf16"]
    if keep:
        options += ["--keep-fp32", *keep]
    if dump_name is not None:
        cfg = t.write_config(os.path.join(work, dump_name + ".json"),
                             os.path.join(work, dump_name), {"net_name": "Net"})
        options = ["--config", cfg, *options]
    env = dict(p.ONE_THREAD)
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        env["GRAPHDUMP_PRECISION_OUT"] = out_dir
    return t.run("python", *options, "--", script, env=env)


CASES = [(name, i) for name in SCRIPTS for i in range(len(KEEP[name]))]


@pytest.mark.parametrize("name,case", CASES,
                         ids=[f"{n}-{' '.join(KEEP[n][i]) or 'none'}" for n, i in CASES])
def test_training_runs_whatever_is_kept_and_dumped(module_scratch, scripts, name, case):
    keep = KEEP[name][case]
    code, out, err = precision_run(module_scratch, scripts[name], keep)
    assert code == 0, f"{name} --keep-fp32 {keep}: exit {code}\n{err[-1500:]}"
    plain = losses(out)
    assert len(plain) == 3 and all(math.isfinite(float(l.split()[2])) for l in plain), (
        f"{name} --keep-fp32 {keep}: three finite losses: {plain}")
    dump = f"{name}_{case}"
    code, out, err = precision_run(module_scratch, scripts[name], keep, dump_name=dump)
    assert code == 0, f"{name} --keep-fp32 {keep} with a tensor dump: exit {code}\n{err[-1500:]}"
    assert losses(out) == plain, (
        f"{name} --keep-fp32 {keep}: the tensor dump changed the losses: {losses(out)} vs "
        f"{plain}")
    assert glob.glob(os.path.join(module_scratch, dump, "rank_0", "Net", "0", "0", "*.npy")), (
        f"{name} --keep-fp32 {keep}: the dump holds tensors")


def test_scripts_plain_python_runs(module_scratch):
    odd = write(module_scratch, "odd.py", ODD)
    ref = subprocess.run([t.PYTHON, odd], capture_output=True, text=True,
                         env={**os.environ, **p.ONE_THREAD}, timeout=300)
    assert ref.returncode == 0, ref.stderr[-800:]
    for options in (["--precision", "bf16"], ["--precision", "bf16", "--keep-fp32", "tanh"]):
        code, out, err = t.run("python", *options, "--", odd, env=p.ONE_THREAD)
        assert code == 0, f"{options}: exit {code}\n{err[-1500:]}"
        assert out.splitlines() == ref.stdout.splitlines(), (
            f"{options}: the script printed\n{out}\nwhere plain python printed\n{ref.stdout}")


def run_kernels(out_dir):
    with open(os.path.join(out_dir, "run.json")) as f:
        return [k["full_name"] for k in json.load(f)["kernels"]]


def test_kernel_names_do_not_depend_on_what_is_kept(module_scratch, scripts):
    for name in ("moe", "pos"):
        # The float32 dump's forward kernels, in execution order.
        dump = os.path.join(module_scratch, f"ids_{name}_fp32")
        cfg = t.write_config(dump + ".json", dump, {"net_name": "Net", "iteration": "0"})
        code, _, err = t.run("python", "--config", cfg, "--", scripts[name], env=p.ONE_THREAD)
        assert code == 0, err[-800:]
        forward = [k for k in p.kernel_names(os.path.join(dump, "rank_0"))
                   if k.startswith("Default/")]
        runs = {}
        for case, keep in enumerate([[]] + [k for k in KEEP[name] if k]):
            out_dir = os.path.join(module_scratch, f"ids_{name}_{case}")
            code, _, err = precision_run(module_scratch, scripts[name], keep, out_dir=out_dir)
            assert code == 0, f"{name} {keep}: {err[-800:]}"
            runs[tuple(keep)] = run_kernels(out_dir)
        first = runs[()]
        for keep, kernels in runs.items():
            assert kernels == first, (
                f"{name}: --keep-fp32 {list(keep)} names its kernels otherwise: "
                f"{[(a, b) for a, b in zip(first, kernels) if a != b][:3]}")
        unknown = [k for k in first if k not in forward]
        assert not unknown, (
            f"{name}: kernels of the precision run that the float32 dump's forward does not "
            f"name (operators autograd ran inside backward?): {unknown[:6]}")
        assert len(first) >= 8, first


@pytest.mark.parametrize("name", ["moe", "pos"])
def test_bisect_of_a_training_script(module_scratch, scripts, name):
    code, out, err = t.run("bisect", "--precision", "bf16", "--steps", "1", "--json", "--",
                           scripts[name], env=p.ONE_THREAD)
    assert code in (0, 1), f"bisect {name}: exit {code}\n{err[-1500:]}"
    result = json.loads(out)
    assert result["outcome"] in ("found", "already_matches", "unreachable"), result
    assert not any(k["full_name"].startswith("Gradients/") for k in result["keep"]), result


def test_bisect_names_the_kernel_a_kept_set_removes(module_scratch):
    branch = write(module_scratch, "branch.py", BRANCH)
    code, out, err = t.run("bisect", "--precision", "bf16", "--", branch, env=p.ONE_THREAD)
    assert (code == 2 and "kernels changed between rounds" in err and "Default/cos-op" in err
            ), f"a kept set that removes a kernel: exit {code}\n{err[-1500:]}"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
