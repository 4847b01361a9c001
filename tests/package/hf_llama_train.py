"""A user's training of a HuggingFace transformers model, for the package's tests and
bench/hf_llama_bench.py: a tiny LlamaForCausalLM (2 layers, hidden 64, 4 heads, vocab 256)
built from its config with random weights (no download), SDPA attention as transformers picks
it, trained by a plain loop: AdamW, a padded batch with labels -100 on the padding, clipping.
Nothing in it knows about graphdump.

    python hf_llama_train.py OUT.npz [--steps N] [--batch B] [--seq T]

saves the trained parameters to OUT.npz (their state_dict names) and prints one JSON line of
the losses and the steps' times.
"""
import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

VOCAB = 256


def tiny_llama():
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=64, attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def batch(generator, size, length):
    ids = torch.randint(1, VOCAB, (size, length), generator=generator)
    mask = torch.ones(size, length, dtype=torch.long)
    mask[0, -3:] = 0  # the first sequence ends in padding
    labels = ids.masked_fill(mask == 0, -100)
    return ids, mask, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = tiny_llama()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    data = torch.Generator().manual_seed(1)
    losses, times = [], []
    for _ in range(args.steps):
        start = time.perf_counter()
        ids, mask, labels = batch(data, args.batch, args.seq)
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.loss.item())
        times.append(time.perf_counter() - start)
    np.savez(args.out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    print(json.dumps({"losses": losses, "steps": times}))


if __name__ == "__main__":
    main()
