"""The explicit API (docs/python.md): a script that turns dumping on itself, wraps the modules
it wants dumped, tracks its optimizer, and marks one submodule with set_dump (dump_mode 2 in
data_dump_set_dump.json).

    PYTHONPATH=build/python .venv/bin/python examples/python/explicit.py \\
        examples/python/data_dump_set_dump.json
"""
import sys

import torch
from torch import nn

import graphdump.torch as gd


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(10, 32), nn.Tanh())
        self.decoder = nn.Linear(32, 10)

    def forward(self, x):
        return self.decoder(self.encoder(x))


class RelativeError(nn.Module):
    """The loss as a second TorchScript module: its kernels are a second graph."""

    def forward(self, prediction, target):
        return ((prediction - target).abs() / (target.abs() + 1.0)).mean()


def main():
    config = sys.argv[1] if len(sys.argv) > 1 else None  # None: $GRAPHDUMP_CONFIG
    torch.manual_seed(0)
    with gd.Dump(config) as dump:
        model = dump.wrap(torch.jit.script(Net()))           # graph 0
        loss_fn = dump.wrap(torch.jit.script(RelativeError()))  # graph 1
        dump.set_dump(model.encoder)  # dump_mode 2: the encoder, its gradients and updates
        optimizer = dump.track(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
        for step in range(3):
            x = torch.randn(8, 10)
            optimizer.zero_grad()
            loss = loss_fn(model(x), x)
            loss.backward()
            optimizer.step()
            print(f"iteration {dump.iteration}: loss {loss.item():.4f}")
    summary = dump.summary
    print(f"{summary['files']} files in {summary['root']}")


if __name__ == "__main__":
    main()
