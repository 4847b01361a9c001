"""A small sequence classifier for graphdump hunt's tests (test_hunt.py): masked mean pooling
divides by each sequence's mask sum, so the batch of step --plant, whose row --row is all
padding, makes 0/0 = NaN there. Run as a plain script, unchanged, under graphdump hunt.

  --steps N          optimizer steps (default 6)
  --plant S          the step whose batch holds the all-padding row (-1: none)
  --row R            that row (default 3)
  --sleep SECONDS    sleep in each step (for the interrupt test)
  --crash-at S       raise RuntimeError at step S (before any NaN)
  --transient FILE   a forward hook on embed adds 0/denominator to its output on every step;
                     at step --plant, when FILE does not exist yet (it is then created), row 2
                     of the denominator is 0: a NaN the rerun does not see
  --marker FILE      create FILE at step 1 (the interrupt test waits for it)
  --ddp              torch.distributed (gloo) with DistributedDataParallel; --plant applies to
                     rank 1 only
  --catch-exit       catch SystemExit around optimizer.step() and train on
  --resume FILE      resume from FILE (model, optimizer, step) when it exists; save it after
                     each step
  --mkdir DIR        os.mkdir(DIR) first (fails when DIR exists: a rerun)
  --vary FILE        like --transient, but the NaN (row 2 of embed's output at step --plant)
                     is there on every run; when FILE exists (the rerun), that step's other
                     values of embed's output are scaled by 1.5: the same count of NaN, other
                     values
  --blowup S         the batch of step S is multiplied by 1e6 (float16 overflow, finite)
  --spawn            train inside torch.multiprocessing.spawn (one process)
  --report-dynamo FILE  append to FILE, before the optimizer is made, the hunt pass running
                     this script ($GRAPHDUMP_HUNT's mode) and whether torch._dynamo (which
                     making an optimizer imports) is loaded already
  --set-env          set an environment variable before the optimizer is made
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

BATCH, LENGTH, FEATURES = 6, 5, 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(FEATURES, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x, mask):
        h = torch.tanh(self.embed(x)) * mask.unsqueeze(-1)
        pooled = h.sum(1) / mask.sum(1, keepdim=True)  # the masked mean: 0/0 for an empty row
        return self.head(pooled)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--plant", type=int, default=-1)
    p.add_argument("--row", type=int, default=3)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--crash-at", type=int, default=-1)
    p.add_argument("--transient", default="")
    p.add_argument("--marker", default="")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--catch-exit", action="store_true")
    p.add_argument("--resume", default="")
    p.add_argument("--mkdir", default="")
    p.add_argument("--vary", default="")
    p.add_argument("--blowup", type=int, default=-1)
    p.add_argument("--spawn", action="store_true")
    p.add_argument("--report-dynamo", default="")
    p.add_argument("--set-env", action="store_true")
    a = p.parse_args()
    if a.mkdir:
        os.mkdir(a.mkdir)
    if a.spawn:
        import torch.multiprocessing as mp
        mp.spawn(train, args=(a,), nprocs=1)
    else:
        train(0, a)


def train(process, a):
    rank = 0
    if a.ddp:
        torch.distributed.init_process_group("gloo")
        rank = torch.distributed.get_rank()
    torch.manual_seed(0)
    net = Net()
    model = torch.nn.parallel.DistributedDataParallel(net) if a.ddp else net
    if a.report_dynamo:
        mode = os.environ.get("GRAPHDUMP_HUNT", "").split("|")[-2:-1] or ["none"]
        with open(a.report_dynamo, "a", encoding="utf-8") as f:
            f.write(f"{mode[0]} {'torch._dynamo' in sys.modules}\n")
    if a.set_env:
        os.environ["HUNT_TRAINING_SETTING"] = "1"
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1 + rank)
    first = 0
    if a.resume and os.path.exists(a.resume):
        saved = torch.load(a.resume)
        net.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        data.set_state(saved["data"])
        first = saved["step"] + 1
    for step in range(first, a.steps):
        x = torch.randn(BATCH, LENGTH, FEATURES, generator=data)
        if step == a.blowup:
            x = x * 1e6
        y = torch.randint(0, 3, (BATCH,), generator=data)
        mask = torch.ones(BATCH, LENGTH)
        mask[:, LENGTH - 1] = 0
        if step == a.plant and (not a.ddp or rank == 1):
            mask[a.row] = 0
        if step == a.crash_at:
            raise RuntimeError(f"the data loader failed at step {step}")
        if step == 1 and a.marker:
            open(a.marker, "w").close()
        fault = step == a.plant and a.transient and not os.path.exists(a.transient)
        if fault:
            open(a.transient, "w").close()
        handle = None
        if a.transient:
            # The same kernels on every run; 0/0 in row 2 of embed's output only on the fault.
            def inject(module, inputs, out, fault=fault):
                denominator = torch.ones_like(out)
                denominator[2] = 0 if fault else 1
                return out + torch.zeros_like(out) / denominator
            handle = net.embed.register_forward_hook(inject)
        if a.vary:
            rerun = os.path.exists(a.vary)
            if step == a.plant and not rerun:
                open(a.vary, "w").close()

            def vary(module, inputs, out, planted=step == a.plant, rerun=rerun):
                # (out * scale * m) / m: 0/0 in row 2 where m is 0, out * scale elsewhere.
                m = torch.ones_like(out)
                m[2] = 0 if planted else 1
                return (out * (1.5 if planted and rerun else 1.0) * m) / m
            handle = net.embed.register_forward_hook(vary)
        loss = F.cross_entropy(model(x, mask), y)
        if handle is not None:
            handle.remove()
        optimizer.zero_grad()
        loss.backward()
        if a.catch_exit:
            try:
                optimizer.step()
            except SystemExit:
                pass
        else:
            optimizer.step()
        if a.resume:
            torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                        "data": data.get_state(), "step": step}, a.resume)
        if a.sleep:
            time.sleep(a.sleep)
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    if a.ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
