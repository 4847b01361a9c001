"""Ordinary but less common uses of PyTorch, each run unchanged under `graphdump python` and
compared with plain python (docs/reliability.md, "The training is never changed").

    python3 user_unusual.py MODE OUT
MODE:
  generator  torch.autograd.backward over a generator of two losses; OUT.npz: the gradients
  errors     exceptions a script sees: a kernel failing inside a module (caught, and one left
             to end the script is not needed: caught here), and a ValueError raised by a module
             after another module caught a kernel's error; OUT.json: what the script saw
  sparse     an nn.Embedding with sparse gradients trained by SparseAdam, and torch.sparse.mm
             of a sparse and a dense matrix inside a module; OUT.npz: the parameters, and the
             dense matrix
"""
import json
import sys
import traceback

import numpy as np
import torch
from torch import nn


def generator(out):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = torch.randn(5, 4)
    y = model(x)
    losses = [y[:, 0].pow(2).mean(), y[:, 1].abs().mean()]
    torch.autograd.backward(loss for loss in losses)
    np.savez(out, **{name: (p.grad.numpy() if p.grad is not None else np.array([]))
                     for name, p in model.named_parameters()})


class Mismatched(nn.Module):
    def forward(self, x):
        return x @ x  # (4, 6) @ (4, 6): mismatched


class CatchesInside(nn.Module):
    def forward(self, x):
        try:
            x @ x
        except RuntimeError:
            pass
        return x * 2


class Rejects(nn.Module):
    def forward(self, x):
        raise ValueError("an unrelated value error")


def _seen(e):
    """What a script can see of an exception: its type, message, args and its own frames."""
    frames = [(f.name, f.line) for f in traceback.extract_tb(e.__traceback__)
              if f.filename == __file__]
    return {"type": type(e).__name__, "str": str(e), "args": [str(a) for a in e.args],
            "frames": frames, "cause": repr(e.__cause__), "context": repr(e.__context__)}


def errors(out):
    x = torch.randn(4, 6)
    seen = {}
    try:
        Mismatched()(x)
    except RuntimeError as e:
        seen["kernel"] = _seen(e)
    CatchesInside()(x)
    try:
        Rejects()(x)
    except ValueError as e:
        seen["value"] = _seen(e)
    with open(out, "w") as f:
        json.dump(seen, f)


class SparseProduct(nn.Module):
    def __init__(self, dense):
        super().__init__()
        self.dense = nn.Parameter(dense)

    def forward(self, s):
        return torch.sparse.mm(s, self.dense)


def sparse(out):
    torch.manual_seed(0)
    embed = nn.Embedding(10, 3, sparse=True)
    optimizer = torch.optim.SparseAdam(embed.parameters(), lr=0.1)
    for step in range(3):
        optimizer.zero_grad()
        ids = torch.tensor([[1, 2, 4], [4, 3, 8]]) + step % 2
        embed(ids).pow(2).sum().backward()
        optimizer.step()
    s = torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]]).to_sparse()
    product = SparseProduct(torch.arange(12, dtype=torch.float32).reshape(3, 4))
    with torch.no_grad():
        result = product(s)
    np.savez(out, weight=embed.weight.detach().numpy(), dense=product.dense.detach().numpy(),
             product=result.numpy())


if __name__ == "__main__":
    {"generator": generator, "errors": errors, "sparse": sparse}[sys.argv[1]](sys.argv[2])
