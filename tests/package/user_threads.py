"""Three threads train at once, each its own model, optimizer and data: the main thread and two
worker threads, which run forward, backward() and optimizer.step() while the main thread does
the same (docs/reliability.md, "Threads"). Nothing in it knows about graphdump.

usage: user_threads.py OUT.npz [--steps N]
Writes the final parameters of the three models to OUT.npz (m{k}.{name}).
"""
import argparse
import threading

import numpy as np
import torch
from torch import nn


def make(seed, optimizer):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    x, y = torch.randn(8, 6), torch.randn(8, 3)
    return model, optimizer(model.parameters()), x, y


def train(model, optimizer, x, y, steps, start):
    start.wait()  # the three loops run together
    for step in range(steps):
        optimizer.zero_grad()
        out = model(x + 0.01 * step)
        loss = ((out - y) ** 2).mean()
        loss.backward()
        optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    # Models, optimizers and data made on the main thread, one after the other (one RNG).
    jobs = [make(0, lambda p: torch.optim.Adam(p, lr=0.01)),
            make(1, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
            make(2, lambda p: torch.optim.AdamW(p, lr=0.01))]
    start = threading.Barrier(3)
    errors = []

    def worker(job):
        try:
            train(*job, args.steps, start)
        except BaseException as e:  # re-raised on the main thread: exit status 1
            errors.append(e)
            start.abort()

    threads = [threading.Thread(target=worker, args=(job,)) for job in jobs[1:]]
    for t in threads:
        t.start()
    try:
        train(*jobs[0], args.steps, start)
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    np.savez(args.out, **{f"m{k}.{name}": p.detach().numpy()
                          for k, job in enumerate(jobs) for name, p in job[0].named_parameters()})


if __name__ == "__main__":
    main()
