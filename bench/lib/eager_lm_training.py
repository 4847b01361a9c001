"""A user's eager training script (no torch.jit) for bench/eager_bench.py: a transformer
language model (2 layers, width 128, 4 heads, sequence 64, batch 8 by default: a step of
about 50-100 ms on a 2-core machine), AdamW, a
warmup schedule, gradient clipping. Prints {"steps": [seconds per step], "starts": [each step's
start on time.monotonic()]} as its last line.

    python3 eager_lm_training.py STEPS [LAYERS WIDTH SEQ BATCH] [--msprobe CONFIG] [--compile]

--compile trains torch.compile(model) instead (bench/compile_bench.py): the first step compiles.

--msprobe CONFIG instruments the loop as msprobe (mindstudio-probe, the peer bench/msprobe_bench.py
measures) documents it: PrecisionDebugger(config_path=CONFIG), start(model) before each step's
forward, stop() and step() after its optimizer step.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        attn = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


class LM(nn.Module):
    def __init__(self, vocab, layers, width, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(seq, width))
        self.blocks = nn.ModuleList([Block(width, 4) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.embed(ids) + self.pos[:t]
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


def main():
    args = sys.argv[1:]
    debugger = None
    if "--msprobe" in args:
        at = args.index("--msprobe")
        from msprobe.pytorch import PrecisionDebugger
        debugger = PrecisionDebugger(config_path=args[at + 1])
        del args[at:at + 2]
    compiled = "--compile" in args
    if compiled:
        args.remove("--compile")
    steps = int(args[0])
    layers, width, seq, batch = (int(a) for a in (args[1:5] or (2, 128, 64, 8)))
    vocab = 512
    torch.manual_seed(0)
    model = LM(vocab, layers, width, seq)
    forward = torch.compile(model) if compiled else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    g = torch.Generator().manual_seed(1)
    times, starts = [], []
    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch, seq), generator=g)
        starts.append(time.monotonic())
        start = time.perf_counter()
        if debugger:
            debugger.start(model)
        optimizer.zero_grad()
        logits = forward(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if debugger:
            debugger.stop()
            debugger.step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"steps": times, "starts": starts}))


if __name__ == "__main__":
    main()
