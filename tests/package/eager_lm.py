"""A small language-model training written the way model libraries write them, run unchanged by
the tests: a `forward(input_ids, attention_mask=None, labels=None, **kwargs)` returning a dict,
activation checkpointing around each block, gradient accumulation over 2 micro-batches, AdamW
with a LambdaLR warmup, gradient clipping, and a `torch.no_grad()` validation call between
steps. Nothing in it knows about graphdump.

    python3 eager_lm.py OUT.npz [--steps N] [--padded-step K]

saves the trained parameters to OUT.npz. --padded-step K makes the second sequence of step K's
first micro-batch all padding: its attention scores are all -inf, and softmax makes NaN.
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

VOCAB, WIDTH, HEADS, LAYERS, SEQ, BATCH = 64, 32, 2, 2, 8, 4


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x, mask):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, HEADS, -1).transpose(1, 2)
        k = k.view(b, t, HEADS, -1).transpose(1, 2)
        v = v.view(b, t, HEADS, -1).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(mask, float("-inf"))
        out = scores.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, WIDTH))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x, mask):
        x = x + self.attn(self.norm1(x), mask)
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)
        self.gradient_checkpointing = True

    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs):
        t = input_ids.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        if attention_mask is not None:
            mask = mask | (attention_mask[:, None, None, :] == 0)
        x = self.embed(input_ids)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(block, x, mask)
            else:
                x = block(x, mask)
        logits = self.head(self.norm(x))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB),
                                          labels[:, 1:].reshape(-1))
        return out


def batches(generator, n, all_padding=False):
    for i in range(n):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        mask[0, -2:] = 0  # padding in the first sequence
        if all_padding and i == 0:
            mask[1] = 0
        yield ids, mask


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--padded-step", type=int, default=-1)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 2))
    data = torch.Generator().manual_seed(1)
    accumulation = 2
    val_ids, val_mask = next(batches(torch.Generator().manual_seed(2), 1))
    for step in range(args.steps):
        model.train()
        for ids, mask in batches(data, accumulation, all_padding=step == args.padded_step):
            out = model(ids, attention_mask=mask, labels=ids, return_dict=True)
            (out["loss"] / accumulation).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        model.eval()
        with torch.no_grad():
            val = model(val_ids, attention_mask=val_mask, labels=val_ids)["loss"]
        print(f"step {step} validation loss {val.item():.4f}")
    np.savez(args.out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


if __name__ == "__main__":
    main()
