"""A torch.compile'd training as users write it, for test_compile.py: run unchanged, plain and
under `graphdump python`.

usage: compiled_train.py MODE OUT.npz [--dump CONFIG [--set-dump SUBMODULE]]
  block    a pre-norm transformer block (LayerNorm, attention through
           F.scaled_dot_product_attention, a GELU MLP) compiled with torch.compile(model),
           trained 3 steps by AdamW on a fixed batch
  break    a model whose forward has a graph break (a Python-side value read with .item()
           between its two halves), compiled with torch.compile(model); step 3 feeds a longer
           sequence, so Dynamo compiles again
  nan      a gated linear layer compiled with torch.compile(model) whose gate takes the log of
           the input's first feature: step 3's batch has a negative one, so the fused kernel
           of that line makes the first NaN
  raise    an embedding and a linear layer compiled with torch.compile(model): step 2's batch
           holds a token out of the vocabulary, so the compiled forward raises (the generated
           kernel's bounds check); the script catches it and skips that batch
  fail     as raise, but step 2's bad token is not caught: the script ends with PyTorch's
           exception; OUT.npz gets, before each step, what it feeds the compiled forward (the
           ids, the embedding's weight)
OUT.npz gets every parameter after training and the losses (bit-identity checks).
--dump CONFIG: the training runs in a graphdump.torch.Dump(CONFIG) that the script starts after
  it called torch.compile (the explicit API), wrapping the compiled model and tracking AdamW;
  --set-dump SUBMODULE: then Dump.set_dump(model.SUBMODULE) (dump_mode 2).
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # line: attention
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        h = F.gelu(self.up(self.norm2(x)))  # line: mlp up
        return x + self.down(h)


class Halves(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.first = nn.Linear(width, width)
        self.second = nn.Linear(width, width)

    def forward(self, x):
        h = torch.tanh(self.first(x)) * 0.5  # line: first half
        scale = 1.0 + float(h.detach().abs().mean().item())  # graph break: a Python float
        return torch.relu(self.second(h)) * scale  # line: second half


class Gated(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = self.fc(x)
        gate = torch.log(x[..., :1]) * 0.1 + 1.0  # line: gate
        return h * gate


class Lookup(nn.Module):
    def __init__(self, vocab=10, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.fc = nn.Linear(width, width)

    def forward(self, ids):
        return torch.tanh(self.fc(self.embed(ids)))  # line: lookup


def main():
    mode, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if mode == "block":
        model = Block()
        batches = [torch.randn(2, 8, 32)] * 3
    elif mode == "break":
        model = Halves()
        batches = [torch.randn(4, 6, 16), torch.randn(4, 6, 16), torch.randn(4, 9, 16)]
    elif mode == "nan":
        model = Gated()
        batches = [torch.rand(4, 6, 16) + 0.1 for _ in range(3)]
        batches[2][1, 2, 0] = -1.0
    elif mode == "raise":
        model = Lookup()
        batches = [torch.randint(0, 10, (4, 6)) for _ in range(4)]
        batches[1][2, 3] = 12
    elif mode == "fail":
        model = Lookup()
        batches = [torch.randint(0, 10, (4, 6)) for _ in range(4)]
        batches[2][1, 4] = 11
    else:
        sys.exit(f"unknown mode {mode}")
    compiled = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    dump = None
    if sys.argv[3:4] == ["--dump"]:
        import graphdump.torch as gd
        dump = gd.Dump(sys.argv[4]).start()
        compiled = dump.wrap(compiled)
        dump.track(optimizer)
        if sys.argv[5:6] == ["--set-dump"]:
            dump.set_dump(model.get_submodule(sys.argv[6]))
    losses = []
    for step, x in enumerate(batches):
        if mode == "fail":
            np.savez(out, ids=x.numpy(), weight=model.embed.weight.detach().numpy())
        try:
            loss = compiled(x).pow(2).mean()  # line: loss
        except (RuntimeError, IndexError) as e:  # mode raise: a token out of the vocabulary
            if mode != "raise":
                raise
            print(f"step {step} skipped: {type(e).__name__}")
            continue
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    if dump is not None:
        dump.close()
    print("losses", " ".join(f"{v:.6f}" for v in losses))
    arrays = {name: p.detach().numpy() for name, p in model.named_parameters()}
    arrays["losses"] = np.array(losses)
    np.savez(out, **arrays)


if __name__ == "__main__":
    main()
