"""A torch.compile'd model whose generated kernels write buffers in place (a matmul's output
rewritten by the fused kernel after it, Inductor's reused buffers in the backward), trained two
steps, each followed by an inference call whose input the script overwrites in place right
after the call (the graph inputs' statistics may still be queued then).
Usage: compiled_inplace.py OUT.npz (the trained parameters)."""
import sys

import numpy as np
import torch


class Chain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(64, 64) * 0.1) for _ in range(4)])

    def forward(self, x):
        for w in self.w:
            h = x @ w
            x = (torch.sin(h) * 2 + torch.cos(h)).softmax(-1) * 3
        return x


def main(out):
    torch.manual_seed(0)
    model = Chain()
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = compiled(torch.randn(64, 64)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            probe = torch.randn(64, 64)
            compiled(probe)
            probe.mul_(-4.0)
    np.savez(out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


if __name__ == "__main__":
    main(sys.argv[1])
