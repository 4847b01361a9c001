"""A user's training of a HuggingFace transformers model by transformers.Trainer, for the
package's tests: a tiny LlamaForCausalLM (2 layers, hidden 64, 4 heads, vocab 256) built from
its config with random weights (no download), a tiny in-memory dataset, gradient accumulation
over 2 micro-batches, gradient checkpointing (transformers' default: reentrant), a cosine
schedule, AdamW (Trainer's default optimizer), on the CPU, saving nothing. Nothing in it knows
about graphdump.

    python hf_llama_trainer.py OUT.npz [--steps N]

saves the trained parameters to OUT.npz (their state_dict names) and prints one JSON line of
the losses Trainer logged.
"""
import argparse
import json
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import (LlamaConfig, LlamaForCausalLM, Trainer,  # noqa: E402
                          TrainingArguments)

VOCAB, SEQ, BATCH, ACCUMULATION = 256, 16, 2, 2


class TokenDataset(torch.utils.data.Dataset):
    """Random token sequences, the first of every batch padded at its end."""

    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(1, VOCAB, (n, SEQ), generator=g)
        self.mask = torch.ones(n, SEQ, dtype=torch.long)
        self.mask[::BATCH, -3:] = 0

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        labels = self.ids[i].masked_fill(self.mask[i] == 0, -100)
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": labels}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=64, attn_implementation="sdpa",
                         use_cache=False)
    model = LlamaForCausalLM(config)
    with tempfile.TemporaryDirectory() as output_dir:
        training = TrainingArguments(
            output_dir=output_dir, max_steps=args.steps, per_device_train_batch_size=BATCH,
            gradient_accumulation_steps=ACCUMULATION, gradient_checkpointing=True,
            learning_rate=1e-3, lr_scheduler_type="cosine", weight_decay=0.01,
            optim="adamw_torch", logging_steps=1, save_strategy="no", report_to="none",
            use_cpu=True, seed=0, data_seed=0, dataloader_num_workers=0,
            disable_tqdm=True)
        trainer = Trainer(model=model, args=training,
                          train_dataset=TokenDataset(BATCH * ACCUMULATION * args.steps))
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    np.savez(args.out, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    print(json.dumps({"losses": losses}))


if __name__ == "__main__":
    main()
