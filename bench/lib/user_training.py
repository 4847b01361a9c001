"""A user's training script as bench/python_bench.py times it: a TorchScript CNN, a DataLoader
over synthetic batches, a custom loss, AdamW with a scheduler and gradient clipping. It knows
nothing of graphdump; it prints its step times as one JSON line: {"steps": [seconds, ...]}.

usage: user_training.py STEPS BATCH SIZE
"""
import json
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(),
                                        nn.Linear(128, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    steps, batch, size = (int(a) for a in sys.argv[1:4])
    torch.manual_seed(0)
    model = torch.jit.script(Net())
    data = TensorDataset(torch.randn(steps * batch, 3, size, size),
                         torch.randint(0, 10, (steps * batch,)))
    loader = DataLoader(data, batch_size=batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    times = []
    for x, y in loader:
        start = time.perf_counter()
        optimizer.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y) + 1e-4 * logits.pow(2).mean()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        scheduler.step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"steps": times}))


if __name__ == "__main__":
    main()
