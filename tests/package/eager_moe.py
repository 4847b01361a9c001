"""A top-1 mixture of experts whose routing differs in bfloat16, run unchanged under
`graphdump python` for the tests of discrete outputs and uninitialised memory.

    python3 eager_moe.py DTYPE OUT.npy
DTYPE: float32 or bfloat16 (the model and its data in that dtype, as a user's bf16 run does).

A router (Linear, softmax) scores 4 experts for each of 256 tokens; `topk(1)` picks one. The
router's rows are nearly equal, so the scores of the experts differ by about bfloat16's
rounding and bfloat16 picks another expert for many tokens. Each expert's tokens are found with
`nonzero` (their number depends on the routing: its shape differs between the dtypes), gathered
by indexing, run through the expert and summed into a buffer made by `empty_like` (memory that
holds whatever was there before: not data) and cleared with `zero_`.
"""
import sys

import numpy as np
import torch
from torch import nn

TOKENS, WIDTH, EXPERTS = 256, 16, 4


class Moe(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(WIDTH, EXPERTS)
        self.experts = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(EXPERTS))
        with torch.no_grad():
            base = torch.randn(WIDTH)
            self.router.weight.copy_(base + 1e-3 * torch.randn(EXPERTS, WIDTH))
            self.router.bias.zero_()

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        weight, choice = torch.topk(probs, 1, dim=-1)  # line: topk
        out = torch.empty_like(x)  # line: empty
        out.zero_()
        for e, expert in enumerate(self.experts):
            rows = torch.nonzero(choice[:, 0] == e)[:, 0]
            out.index_add_(0, rows, expert(x[rows]) * weight[rows])
        return out


def main():
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[sys.argv[1]]
    torch.manual_seed(0)
    model = Moe().to(dtype)
    x = torch.randn(TOKENS, WIDTH, generator=torch.Generator().manual_seed(1)).to(dtype)
    with torch.no_grad():
        y = model(x)
    np.save(sys.argv[2], y.float().numpy())


if __name__ == "__main__":
    main()
