"""Many tiny operators in one module call, for bench/eager_bench.py's per-operator cost of the
eager capture: each step calls a module whose forward runs OPS additions on a 16-element
tensor (no optimizer: each call is one iteration). Prints {"steps": [seconds per step]}.

    python3 eager_op_loop.py STEPS OPS
"""
import json
import sys
import time

import torch
from torch import nn


class Loop(nn.Module):
    def __init__(self, ops):
        super().__init__()
        self.ops = ops

    def forward(self, x):
        for _ in range(self.ops):
            x = x + 1
        return x


def main():
    steps, ops = int(sys.argv[1]), int(sys.argv[2])
    model, x = Loop(ops), torch.zeros(16)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        model(x)
        times.append(time.perf_counter() - start)
    print(json.dumps({"steps": times}))


if __name__ == "__main__":
    main()
