"""A bfloat16 model run compiled and eager, for test_compile_compare.py: the same model, the
same seed, the same batch; only torch.compile differs.

usage: compiled_eager.py MODE OUT.npz
  compiled  the model compiled with torch.compile(model)
  eager     the model as it is
The model's "shift" line adds and subtracts 64: eager rounds the sum to bfloat16 (a step of
0.5 there), where Inductor's fused kernel keeps its elementwise chain in float32 and rounds once.
OUT.npz gets the output.
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


def main():
    mode, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
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
