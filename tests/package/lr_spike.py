"""A tiny attention classifier trained under autocast (bfloat16 on the CPU) for the blow-up
tests (test_blowup.py): its learning-rate schedule multiplies AdamW's lr by 1e4 at one
step (--spike S), so that step's update blows the weights up and the loss of the steps after
it explodes (about 1.4 -> 1e4), with no NaN. Run as a plain script, unchanged, under graphdump
python or graphdump hunt.

  --steps N    optimizer steps (default 8)
  --spike S    the step whose lr is multiplied by 1e4 (default 4; -1: none)
"""
import argparse

import torch
import torch.nn.functional as F

BATCH, LENGTH, FEATURES, CLASSES = 8, 6, 16, 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(FEATURES, 3 * FEATURES)
        self.head = torch.nn.Linear(FEATURES, CLASSES)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = torch.einsum("bqd,bkd->bqk", q, k) / FEATURES ** 0.5
        h = torch.einsum("bqk,bkd->bqd", scores.softmax(-1), v)
        return self.head(h.mean(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--spike", type=int, default=4)
    a = p.parse_args()
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.99),
                                  weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 1e4 if step == a.spike else 1.0)
    data = torch.Generator().manual_seed(1)
    for step in range(a.steps):
        x = torch.randn(BATCH, LENGTH, FEATURES, generator=data)
        y = torch.randint(0, CLASSES, (BATCH,), generator=data)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).float(), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # the update
        schedule.step()
        print(f"step {step} loss {loss.item():.4g}", flush=True)


if __name__ == "__main__":
    main()
