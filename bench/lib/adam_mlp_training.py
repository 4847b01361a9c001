"""A user's eager training script for bench/optimizer_memory_bench.py: an MLP of LAYERS linear
layers WIDTH wide (ReLU between them), batch 8, trained STEPS steps with AdamW. Prints
{"peak_rss_mib": the process's peak resident memory, "parameters_mib": the parameters' bytes}
as its last line.

    python3 adam_mlp_training.py STEPS [LAYERS WIDTH]
"""
import json
import resource
import sys

import torch
from torch import nn


def main():
    steps = int(sys.argv[1])
    layers, width = (int(a) for a in sys.argv[2:4]) if len(sys.argv) >= 4 else (3, 4096)
    torch.manual_seed(0)
    stack = []
    for i in range(layers):
        stack += [nn.Linear(width, width)] + ([nn.ReLU()] if i + 1 < layers else [])
    model = nn.Sequential(*stack)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, width)
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    print(json.dumps({"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "parameters_mib": parameters / 2**20}))


if __name__ == "__main__":
    main()
