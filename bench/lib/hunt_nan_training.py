"""The training bench/hunt_bench.py hunts: a sequence classifier whose masked mean pooling
divides by each sequence's mask sum; the batch of step --plant holds an all-padding sequence,
so 0/0 makes NaN there (and the loss, gradients and parameters after it). Batch 64, sequence
16, width 1024: steps of 20-30 ms on the 2-core bench machine with torch 2.13 (50 ms or more
with torch 1.13), so Python's and torch's start-up weigh more than the steps. Prints each
step's time and, at the end, the median step time as JSON.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


class Net(torch.nn.Module):
    def __init__(self, features, width, classes):
        super().__init__()
        self.embed = torch.nn.Linear(features, width)
        self.hidden = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x, mask):
        h = torch.tanh(self.embed(x)) * mask.unsqueeze(-1)
        pooled = h.sum(1) / mask.sum(1, keepdim=True)
        return self.head(torch.relu(self.hidden(pooled)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--plant", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=16)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--width", type=int, default=1024)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = Net(a.features, a.width, 10)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1)
    times = []
    for step in range(a.steps):
        start = time.perf_counter()
        x = torch.randn(a.batch, a.length, a.features, generator=data)
        y = torch.randint(0, 10, (a.batch,), generator=data)
        mask = torch.ones(a.batch, a.length)
        if step == a.plant:
            mask[5] = 0
        loss = F.cross_entropy(net(x, mask), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        print(f"step {step} loss {loss.item():.4f} {times[-1] * 1000:.1f} ms", flush=True)
    print(json.dumps({"median_step_s": statistics.median(times)}))


if __name__ == "__main__":
    main()
