"""A training that frees a tensor's bytes behind PyTorch's operators, as FSDP frees a gathered
parameter's memory: `untyped_storage().resize_(0)` on a module's output once its backward pass
no longer needs it, then new tensors that may take the freed memory. test_statistics_thread
runs it with the statistics thread behind: the output's statistic rows must hold its values.
Usage: storage_resize.py OUT.npz (each step's output max and min)."""
import sys

import numpy as np
import torch


def main(out):
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 256)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    maxima, minima = [], []
    for _ in range(2):
        y = lin(torch.randn(64, 256)) * 2.0
        maxima.append(float(y.detach().max()))
        minima.append(float(y.detach().min()))
        y.square().mean().backward()
        y.detach().untyped_storage().resize_(0)
        refill = [torch.full((64, 256), 1e6) for _ in range(4)]  # may take the freed memory
        del refill
        opt.step()
        opt.zero_grad()
    np.savez(out, max=np.array(maxima), min=np.array(minima))


if __name__ == "__main__":
    main(sys.argv[1])
