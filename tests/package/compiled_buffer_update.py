"""A compiled module that updates, in place, a buffer of its own (a running statistic, as batch
norm keeps), read before and after the update within the same call: test_compile.py checks that
a statistic dump summarises the buffer as each kernel read it.

    python compiled_buffer_update.py OUT.npz
"""
import sys

import numpy as np
import torch
from torch import nn


class Running(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.register_buffer("running", torch.ones(width))

    def forward(self, x):
        before = torch.relu(self.proj(x)) * self.running  # reads the buffer as it was
        self.running.mul_(0.5).add_(before.mean(0))  # and updates it
        after = self.running.unsqueeze(0) @ self.proj.weight  # an extern call reads it updated
        return before.sum() + after.tanh().sum()


def main():
    torch.manual_seed(0)
    model = torch.compile(Running())
    with torch.no_grad():  # the update writes what the product's gradient would need
        outs = [model(torch.randn(8, 16)).item() for _ in range(3)]
    np.savez(sys.argv[1], outs=np.array(outs), running=model.running.numpy())


if __name__ == "__main__":
    main()
