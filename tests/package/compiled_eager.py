"""A bfloat16 model run compiled and eager, for test_compile_compare.py: the same model, the
same seed, the same batch; only torch.compile differs.

usage: compiled_eager.py MODE OUT.npz
  compiled  the model compiled with torch.compile(model)
  eager     the model as it is
The model's "shift" line adds and subtracts 64: eager rounds the sum to bfloat16 (a step of
0.5 there), where Inductor's fused kernel keeps its elementwise chain in float32 and rounds once.
  train-compiled  a training step of TrainNet in bfloat16, compiled with torch.compile(model):
                  forward, a loss written in Python, backward, an SGD step
  train-eager32   the same step of TrainNet as it is, in float32
TrainNet's first linear has a bias near 64, so its output lies near 64, where bfloat16's step is
0.25 to 0.5; the "unshift" line subtracts the 64: in bfloat16 (compiled or not) what is left
carries that rounding, an error far beyond bfloat16's standard against float32, which the GELU
after it (fused with the subtraction by Inductor) passes on.
  branch-compiled  Branches in bfloat16 compiled with torch.compile(model)
  branch-eager32   Branches as it is, in float32
Branches' "gate" and "half" lines both read the first linear's output (near 64), which Inductor
computes in one generated kernel writing two buffers (the sigmoid's and the product's): the gate
subtracts the 64, so what is left carries bfloat16's rounding of the linear's output, an error
far beyond bfloat16's standard against float32; the half only scales by 0.5 (exact), within it.
OUT.npz gets the output (and, for the training step, the parameters after it).
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        h = F.gelu(self.up(self.norm(x)))  # line: up
        h = (h + 64.0) - 64.0  # line: shift
        return x + self.down(h)  # line: down


class TrainNet(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        with torch.no_grad():
            self.up.bias += 64.0

    def forward(self, x):
        h = self.up(self.norm(x))  # line: train up
        h = h - 64.0  # line: unshift
        h = F.gelu(h)  # line: act
        return x + self.down(h)  # line: train down


class Branches(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.gate_out = nn.Linear(4 * width, width)
        self.half_out = nn.Linear(4 * width, width)
        with torch.no_grad():
            self.up.bias += 64.0

    def forward(self, x):
        h = self.up(x)  # line: branch up
        g = torch.sigmoid(h - 64.0)  # line: gate
        s = h * 0.5  # line: half
        return self.gate_out(g) + self.half_out(s)  # line: branch out


def train(compiled):
    torch.manual_seed(0)
    model = TrainNet()
    x = torch.randn(2, 8, 32)
    if compiled:
        model, x = model.to(torch.bfloat16), x.to(torch.bfloat16)
    run = torch.compile(model) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    y = run(x)
    loss = y.float().pow(2).mean()  # line: train loss
    loss.backward()
    optimizer.step()
    arrays = {name: p.detach().float().numpy() for name, p in model.named_parameters()}
    return y.detach().float().numpy(), arrays


def main():
    mode, out = sys.argv[1], sys.argv[2]
    if mode in ("train-compiled", "train-eager32"):
        y, arrays = train(mode == "train-compiled")
        np.savez(out, y=y, **arrays)
        return
    torch.manual_seed(0)
    if mode in ("branch-compiled", "branch-eager32"):
        model, x = Branches(), torch.randn(2, 8, 32)
        if mode == "branch-compiled":
            model, x = model.to(torch.bfloat16), x.to(torch.bfloat16)
        with torch.no_grad():
            y = (torch.compile(model) if mode == "branch-compiled" else model)(x)
        np.savez(out, y=y.float().numpy())
        return
    model = Net().to(torch.bfloat16)
    x = torch.randn(2, 8, 32).to(torch.bfloat16)
    if mode == "compiled":
        run = torch.compile(model)
    elif mode == "eager":
        run = model
    else:
        sys.exit(f"unknown mode {mode}")
    with torch.no_grad():
        y = run(x)
    np.savez(out, y=y.float().numpy())


if __name__ == "__main__":
    main()
