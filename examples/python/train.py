"""An ordinary PyTorch training script, as graphdump python runs it unchanged (docs/python.md):

    graphdump python --config examples/python/data_dump.json examples/python/train.py

Nothing here knows about graphdump: the model is a plain nn.Module, the loss is written in
Python, the loop clips gradients and steps a scheduler. Every operator of the training is
dumped as a kernel, with its module path and source line. Optional argument: the number of
epochs (default 1).
"""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(2))
        self.classifier = nn.Linear(16 * 4, 5)

    def forward(self, x):
        h = self.features(x)
        return self.classifier(torch.flatten(h, 1))


def smoothed_cross_entropy(logits, labels, smoothing=0.1):
    log_p = torch.log_softmax(logits, dim=1)
    nll = -log_p.gather(1, labels[:, None]).squeeze(1)
    return ((1 - smoothing) * nll - smoothing * log_p.mean(dim=1)).mean()


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(24, 3, 16, 16), torch.randint(0, 5, (24,)))
    loader = DataLoader(data, batch_size=6, shuffle=True)  # 4 steps an epoch
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for epoch in range(epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            loss = smoothed_cross_entropy(model(images), labels)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
