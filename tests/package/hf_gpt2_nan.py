"""A user's training of a HuggingFace transformers GPT2LMHeadModel (tiny config, random
weights, no download) on precomputed input features, for the package's hunt tests: the data
pipeline standardises each record's features by their own mean and standard deviation, and a
blank record (every feature equal) has a standard deviation of 0, so its features come out
0/0 = NaN: the bug a real feature pipeline has. The model itself is transformers' code,
unchanged. Nothing in it knows about graphdump.

    python hf_gpt2_nan.py [--steps N] [--blank-step K] [--blank-row R]

--blank-step K makes row R (default 1) of step K's batch a blank record; without it every
record is fine and the training stays finite.
"""
import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

VOCAB, WIDTH, SEQ, BATCH = 128, 32, 8, 4


def standardise(features):
    """Each record (row) to mean 0 and standard deviation 1 over its elements."""
    mean = features.mean(dim=(1, 2), keepdim=True)
    std = features.std(dim=(1, 2), keepdim=True)
    return (features - mean) / std


def batches(steps, blank_step, blank_row):
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        features = torch.randn(BATCH, SEQ, WIDTH, generator=g)
        labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        if step == blank_step:
            features[blank_row] = 0.5  # a blank record
        yield standardise(features), labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--blank-step", type=int, default=-1)
    parser.add_argument("--blank-row", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=WIDTH, n_layer=2, n_head=2,
                        n_inner=64, use_cache=False)
    model = GPT2LMHeadModel(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (features, labels) in enumerate(batches(args.steps, args.blank_step,
                                                      args.blank_row)):
        out = model(inputs_embeds=features, labels=labels)  # the call of the model
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step} loss {out.loss.item():.4f}")


if __name__ == "__main__":
    main()
