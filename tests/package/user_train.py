"""A user's own training script, written the way people write them, for the package's tests:
its own nn.Module made TorchScript, a custom loss, a DataLoader over several batches, an LR
scheduler, gradient clipping and AdamW. Nothing in it knows about graphdump.

usage: user_train.py OUT.npz [--epochs N] [--nan-at STEP]
Writes the final parameters (and the losses) to OUT.npz.
"""
import argparse

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16))
        self.head = nn.Linear(16, 3)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        h = torch.tanh(self.features(x))
        h = self.norm(h)
        return self.head(h)


def weighted_loss(out, target, weight):
    """A custom loss: weighted squared error plus a small L1 penalty on the outputs."""
    return ((out - target) ** 2 * weight).mean() + 0.01 * out.abs().mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--nan-at", type=int, default=-1, help="poison the input of this step")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.jit.script(Net())
    x = torch.randn(40, 12)
    y = torch.randn(40, 3)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False)  # 5 batches
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    weight = torch.tensor([1.0, 2.0, 0.5])
    losses = []
    step = 0
    for _ in range(args.epochs):
        for xb, yb in loader:
            if step == args.nan_at:
                xb = xb.clone()
                xb[0, 0] = float("nan")
            optimizer.zero_grad()
            loss = weighted_loss(model(xb), yb, weight)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            step += 1
    params = {name: p.detach().numpy() for name, p in model.named_parameters()}
    np.savez(args.out, losses=np.array(losses), **params)
    print(f"trained {step} steps, last loss {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
