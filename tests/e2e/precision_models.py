#!/usr/bin/env python3
"""Models and inputs for the precision-debugging tests (docs/precision.md), made from fixed seeds.

usage: .venv/bin/python tests/e2e/precision_models.py OUT_DIR

  dot_net      linear -> relu -> dot -> mul -> add -> tanh. On the CPU, LibTorch 1.13's
               bfloat16 dot accumulates in bfloat16: over 4096 terms it is wrong by ~10%, while
               every other kernel is accurate to bfloat16 rounding.
  naive_var    var = E[x^2] - E[x]^2 on rows whose mean is 100: the subtraction is exact (its
               inputs lie within a factor 2 of each other) but cancels, so rounding E[x^2] and
               E[x]^2 to bfloat16 (steps of 64 near 10^4) leaves nothing of a variance near 1.
  replay_ops   conv2d, linear, matmul, softmax, layer_norm, add (replay reproduces each bit for
               bit).
  pos_enc      a positional encoding: positions = cumsum of a mask (1 ... 1024), angle =
               positions * freqs (a learned frequency vector), sin(angle). In bfloat16 the
               positions above 256 and freqs are rounded, and sin of angles near 1000 turns
               their rounding into a phase error of radians: sin is ill-conditioned, every
               kernel before it accurate, and the fix keeps the chain and freqs in float32.

Inputs (float32 .npy): dot_x.npy (16,), var_x.npy (4, 1024), ops_x.npy (2, 3, 8, 8),
pos_x.npy (1024,) ones (the mask).
var_x holds multiples of 1/2 between 64 and 128 (exact in bfloat16) whose rows have mean
exactly 100, so the bfloat16 run starts from the float32 run's values.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class DotNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 4096)
        self.w = nn.Parameter(torch.rand(4096) / 64)
        self.scale = nn.Parameter(torch.tensor([0.05, -0.1, 0.02, 0.08]))
        self.shift = nn.Parameter(torch.tensor([0.1, 0.2, -0.3, 0.0]))

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        s = torch.dot(h, self.w)  # DOT_LINE: inaccurate in bfloat16 on the CPU
        y = s * self.scale + self.shift
        return torch.tanh(y)


class NaiveVar(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        m2 = (x * x).mean(dim=1)
        mu = x.mean(dim=1)
        var = m2 - mu * mu  # VAR_LINE: exact subtraction that cancels
        return var * self.gain


class ReplayOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.m = nn.Parameter(torch.randn(8, 8) / 3)

    def forward(self, x):
        h = self.conv(x)
        h = self.fc(h)
        h = torch.matmul(h, self.m)
        h = torch.softmax(h, dim=-1)
        h = self.norm(h)
        return h + x.sum(dim=1, keepdim=True)


class PosEnc(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = nn.Parameter(1.37 / 10000 ** (torch.arange(16, dtype=torch.float32) / 16))

    def forward(self, mask):
        pos = torch.cumsum(mask, dim=0)  # POS_LINE: positions 1 ... 1024
        angle = pos.unsqueeze(1) * self.freqs  # ANGLE_LINE: positions times frequencies
        return torch.sin(angle)  # SIN_LINE: ill-conditioned for angles near 1000


def var_input():
    """(4, 1024) multiples of 1/2 in [64, 128) whose every row has mean exactly 100."""
    rng = np.random.default_rng(15)
    half = np.round(rng.standard_normal((4, 512)) * 2) / 2
    return (100 + np.concatenate([half, -half], axis=1)).astype(np.float32)


def make(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for seed, (name, cls) in enumerate((("dot_net", DotNet), ("naive_var", NaiveVar),
                                        ("replay_ops", ReplayOps), ("pos_enc", PosEnc))):
        torch.manual_seed(seed)
        torch.jit.save(torch.jit.script(cls().eval()), os.path.join(out_dir, name + ".pt"))
    rng = np.random.default_rng(3)
    np.save(os.path.join(out_dir, "dot_x.npy"), rng.standard_normal(16).astype(np.float32))
    np.save(os.path.join(out_dir, "var_x.npy"), var_input())
    np.save(os.path.join(out_dir, "ops_x.npy"),
            rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    np.save(os.path.join(out_dir, "pos_x.npy"), np.ones(1024, dtype=np.float32))


if __name__ == "__main__":
    import warnings  # here, so that the models' lines stay where docs/precision.md shows them
    # torch.jit's deprecation warnings (torch >= 2.10) say nothing to a script whose models exist
    # to be TorchScript; other warnings show as usual.
    warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is (deprecated|not supported in Python)")
    make(sys.argv[1])
