"""Data-parallel training with DistributedDataParallel over gloo, as graphdump python runs it
with two ranks on this machine (docs/python.md):

    graphdump python --config examples/python/data_dump_ddp.json --nproc 2 examples/python/ddp.py

Each rank dumps into rank_{rank}; the gradient all-reduce is dumped as AllReduce kernels.
"""
import torch
import torch.distributed as dist
from torch import nn


def main():
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from --nproc
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    model = nn.parallel.DistributedDataParallel(torch.jit.script(net))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)  # each rank its own shard
    for step in range(4):
        x, y = torch.randn(16, 8, generator=generator), torch.randint(0, 2, (16,))
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"rank {rank}: loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
