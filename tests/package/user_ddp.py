"""A user's data-parallel training script for the package's tests, started torchrun-style (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by the caller): gloo, a TorchScript model inside
DistributedDataParallel, each rank on its own shard. Nothing in it knows about graphdump.

usage: user_ddp.py OUT_PREFIX [--steps N] [--hook] [--eager] [--compile]
--hook registers DDP's own allreduce_hook as the communication hook; --eager keeps the model a
plain nn.Module (no torch.jit.script); --compile (with --eager) trains torch.compile(DDP(model)).
Writes OUT_PREFIX.rank{r}.npz with every parameter after each step (name@step).
"""
import argparse
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--hook", action="store_true")
    parser.add_argument("--eager", action="store_true")
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    net = Net() if args.eager else torch.jit.script(Net())
    model = nn.parallel.DistributedDataParallel(net)
    if args.hook:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if args.compile:
        model = torch.compile(model)
    g = torch.Generator().manual_seed(100 + rank)
    saved = {}
    for step in range(args.steps):
        x = torch.randn(4, 6, generator=g)
        y = torch.randint(0, 2, (4,), generator=g)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        ddp = model._orig_mod if args.compile else model
        for name, p in ddp.module.named_parameters():
            saved[f"{name}@{step}"] = p.detach().numpy().copy()
    np.savez(f"{args.out}.rank{rank}.npz", **saved)
    if args.hook:
        # allreduce_hook's `then` callback of the last all-reduce is released on a gloo thread,
        # which needs the interpreter: if the interpreter is already shutting down, that thread
        # ends the process with "terminate called without an active exception" (torch 2.13,
        # plain python, no graphdump: 7 runs of 40). The main thread waits here, without the
        # interpreter's lock, so that the gloo threads finish first.
        dist.barrier()
        time.sleep(0.2)
    dist.destroy_process_group()
    print(f"rank {rank}/{world}: {args.steps} steps")


if __name__ == "__main__":
    main()
