"""A small model trained with a learning-rate schedule that changes the lr at every step (as
transformers' Trainer's linear and cosine schedules do), for bench/schedule_bench.py. Prints
{"steps": [seconds per step], "starts": [each step's time.monotonic()]} as its last line.

    python3 schedule_training.py STEPS
"""
import json
import sys
import time

import torch
from torch import nn


def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    times, starts = [], []
    for _ in range(steps):
        starts.append(time.monotonic())
        start = time.perf_counter()
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        schedule.step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"steps": times, "starts": starts}))


if __name__ == "__main__":
    main()
