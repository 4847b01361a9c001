"""A training that writes tensors in place wherever PyTorch lets a script do it: a module's
output scaled in place, batch norm's running statistics, an in-place ReLU, dropout, gradients
accumulated over two micro-batches into .grad, kept between steps (zero_grad without
set_to_none) in the first and last step, set to None in the second (the first micro-batch's
gradients are then taken over as .grad by autograd, and the second's added to them in place),
clipped in place, AdamW's foreach update of parameters and state, and, between
steps, weights clamped through `.data` (a WGAN critic's clipping: a write that leaves the
parameter's version counter as it was). Each
micro-batch comes from a new DataLoader worker process, forked in the middle of the step
(while statistics of the step may still be queued).
Usage: user_inplace.py OUT.npz (the trained parameters, and `taken_over`: how many .grad
tensors the second step's first backward pass took over without a copy)."""
import sys

import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = self.fc1(x)
        h.mul_(0.5)
        h = torch.relu_(self.bn(h))
        y = self.fc2(self.drop(h))
        y.add_(1.0)
        return y


def main(out):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    data = torch.utils.data.TensorDataset(torch.randn(48, 16), torch.randn(48, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True, num_workers=1)
    made = {}  # parameter name -> data_ptr of the gradient its backward made
    for name, p in model.named_parameters():
        p.register_hook(lambda g, name=name: made.__setitem__(name, g.data_ptr()))
    taken_over = 0
    for step in range(3):
        opt.zero_grad(set_to_none=step == 1)
        for micro in range(2):
            x, target = next(iter(loader))
            loss = ((model(x) - target) ** 2).mean()
            loss.backward()
            if step == 1 and micro == 0:
                taken_over = sum(made[n] == p.grad.data_ptr()
                                 for n, p in model.named_parameters())
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        for p in model.fc1.parameters():
            p.data.clamp_(-0.15, 0.15)
    np.savez(out, taken_over=np.array(taken_over),
             **{k: v.detach().numpy() for k, v in model.state_dict().items()})


if __name__ == "__main__":
    main(sys.argv[1])
