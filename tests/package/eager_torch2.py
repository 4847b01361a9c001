"""Ordinary eager trainings that use what PyTorch 2 added since LibTorch 1.13, for
test_eager_torch2.py, each run unchanged by plain python and under `graphdump python`. Nothing
in it knows about graphdump.

    python eager_torch2.py MODE OUT.npz

trains STEPS steps of SGD (or the optimizer MODE names) and saves the final parameters (and
the losses, "losses") to OUT.npz. Every mode's model computes attention with
F.scaled_dot_product_attention (causal) and normalises with nn.RMSNorm and F.rms_norm (torch
2.4). MODE:
  base           just that
  autocast       the forward under torch.amp.autocast("cpu", dtype=torch.bfloat16)
  checkpoint     each block under torch.utils.checkpoint.checkpoint(..., use_reentrant=False)
  foreach        Adam(foreach=True): the multi-tensor update (_foreach_* operators)
  single         Adam(foreach=False): the per-parameter update
  no_grad        an evaluation forward under torch.no_grad() after each step
  inference_mode an evaluation forward under torch.inference_mode() after each step
  forward_hook   a forward hook of the script's own on a submodule that scales its output
  vmap           the loss adds a term computed per sample with torch.vmap: each sample's
                 predictions weighted by SCALE (torch.func, torch 2.0)
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

WIDTH, HEADS, SEQ, BATCH, STEPS = 16, 2, 6, 3, 3
SCALE = torch.linspace(0.5, 1.5, SEQ)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (y.view(b, t, HEADS, -1).transpose(1, 2)
                   for y in self.qkv(x).chunk(3, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(b, t, WIDTH))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(WIDTH)
        self.attn = Attention()
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(), nn.Linear(2 * WIDTH, WIDTH))

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(F.rms_norm(x, (WIDTH,)))


class Net(nn.Module):
    def __init__(self, checkpointed=False):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.head = nn.Linear(WIDTH, 1)
        self.checkpointed = checkpointed

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return self.head(x)


def scale_output(module, args, output):
    """The script's own forward hook: its result replaces the module's output."""
    return output * 0.5 + 1.0


def main():
    mode, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    net = Net(checkpointed=mode == "checkpoint")
    if mode == "forward_hook":
        net.blocks[0].mlp.register_forward_hook(scale_output)
    if mode in ("foreach", "single"):
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-2, foreach=mode == "foreach")
    else:
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    data = torch.Generator().manual_seed(1)
    x_eval = torch.randn(BATCH, SEQ, WIDTH, generator=torch.Generator().manual_seed(2))
    losses = []
    for _ in range(STEPS):
        x = torch.randn(BATCH, SEQ, WIDTH, generator=data)
        y = torch.randn(BATCH, SEQ, 1, generator=data)
        if mode == "autocast":
            with torch.amp.autocast("cpu", dtype=torch.bfloat16):
                pred = net(x)
            loss = F.mse_loss(pred.float(), y)
        else:
            pred = net(x)
            loss = F.mse_loss(pred, y)
            if mode == "vmap":
                per_sample = torch.vmap(lambda p: (p * SCALE).sum())(pred.squeeze(-1))
                loss = loss + 0.01 * per_sample.mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if mode == "no_grad":
            with torch.no_grad():
                losses.append(net(x_eval).sum().item())
        elif mode == "inference_mode":
            with torch.inference_mode():
                losses.append(net(x_eval).sum().item())
    state = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    np.savez(out, losses=np.array(losses), **state)
    print(f"losses {losses}")


if __name__ == "__main__":
    main()
