"""Small eager scripts for the eager-capture tests, each run unchanged under `graphdump python`.

    python3 eager_small.py MODE
MODE:
  forward   one call of Net on a fixed input (eager)
  scripted  the same call of torch.jit.script(Net)
  inplace   a module whose forward writes a tensor in place (y.add_(1))
  autocast  an MLP's call under torch.autocast("cpu", dtype=torch.bfloat16) (not Net: torch
            1.13's CPU autocast fails on layer_norm by itself)
  raises    a module whose matmul gets mismatched shapes
  reuse     a module that drops a kernel's output, then reads a tensor made by no kernel
            (`.data`), which may be given the dropped tensor's address
"""
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16))
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.norm(self.features(x)))


class InPlace(nn.Module):
    def forward(self, x):
        y = x * 2
        y.add_(1)
        return y.relu()


class Reuse(nn.Module):
    def forward(self, x):
        for _ in range(20):
            y = x * 2
            del y
            z = x.data
            x = x + z
        return x


class Raises(nn.Module):
    def forward(self, x):
        return x @ x  # (4, 6) @ (4, 6): mismatched


def main():
    mode = sys.argv[1]
    torch.manual_seed(0)
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    if mode == "forward":
        print(Net()(x).sum().item())
    elif mode == "scripted":
        print(torch.jit.script(Net())(x).sum().item())
    elif mode == "inplace":
        print(InPlace()(x).sum().item())
    elif mode == "autocast":
        mlp = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            print(mlp(x).float().sum().item())
    elif mode == "raises":
        Raises()(x)
    elif mode == "reuse":
        print(Reuse()(x).sum().item())
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
