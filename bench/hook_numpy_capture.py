#!/usr/bin/env python3
"""graphdump's kernel dump against the capture a PyTorch user writes by hand.

The hand-written capture: the same model (the eager module examples/make_models.py scripts,
loaded with the .pt's weights), plain SGD training (lr 0.01, cross-entropy) on the same batch for
the same number of steps, and numpy.save() of what graphdump's dump holds, as a PyTorch user
gets it by hand: on every leaf module a forward hook saving its inputs, its own parameters and
its outputs, and a full backward hook saving the gradients it receives and sends; after
backward() every parameter's gradient, after step() every updated parameter (in-place ReLUs
made out-of-place, which full backward hooks require). graphdump:
`graphdump train MODEL.pt --data --labels` with saved_data "tensor" of every kernel, forward,
backward and optimizer, in asynchronous mode (e2e_dump_settings.enable false: files written by
a background thread while training goes on) and in synchronous mode (the default: written on
the training thread, as the hooks are).

Step 0 is left out of both captures (hooks are attached after it; graphdump dumps iterations
1..STEPS-1), and each capture is charged the time it adds to its own undumped training:
hook seconds = hooked steps - plain steps (same process), graphdump seconds = wall with dump -
wall without dump (includes the queue drain at exit). Prints bytes written and seconds per byte
of each and `bench: graphdump_vs_hook_numpy ratio=X` (asynchronous) and
`bench: graphdump_vs_hook_numpy_sync ratio=X` (hook seconds per byte / graphdump seconds per
byte; > 1 means graphdump is faster per byte), and checks that graphdump wrote more bytes than
the hooks. The whole comparison runs BENCH_ROUNDS times and the ratios printed are the medians
of the rounds' ratios: this machine's write speed moves by tens of percent between minutes.

Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_SOURCE_DIR; BENCH_MODEL (default
demo_alexnet), BENCH_SHAPE (default 8x3x64x64), BENCH_STEPS (default 4), BENCH_ROUNDS (default
3), BENCH_DIR.
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402
import numpy as np
import torch
import torch.nn.functional as F

BIN = os.environ.get("GRAPHDUMP_BIN", "build/tools/graphdump")
MODEL = os.environ.get("BENCH_MODEL", "demo_alexnet")
SHAPE = [int(d) for d in os.environ.get("BENCH_SHAPE", "8x3x64x64").split("x")]
STEPS = max(2, int(os.environ.get("BENCH_STEPS", "4")))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "3")))
CLASSES = 10


def graphdump_train(model, data, labels, config, work):
    """Wall seconds of `graphdump train` (with `config`, or without dump)."""
    args = [BIN, "train", model, "--steps", str(STEPS), "--data", data, "--labels", labels]
    if config:
        args += ["--config", config]
    _, wall = benchutil.run_graphdump("hook_numpy_capture", args, work)
    return wall


def hook_train(model_path, x, y, out_dir):
    """Trains in Python; returns (seconds of steps 1.. without hooks, with hooks)."""
    sys.path.insert(0, os.path.join(benchutil.SOURCE, "examples"))
    import make_models  # noqa: E402  (the eager definition of the scripted model)

    def run(capture):
        net = make_models.eager(MODEL)
        net.load_state_dict(torch.jit.load(model_path).state_dict())
        net.train()
        opt = torch.optim.SGD(net.parameters(), lr=0.01, foreach=False)
        handles = []
        state = {"step": 0, "seq": 0}

        def save(name, kind, tensors):
            for i, t in enumerate(tensors):
                if isinstance(t, torch.Tensor):
                    d = os.path.join(out_dir, str(state["step"]))
                    np.save(os.path.join(d, f"{state['seq']}.{name}.{kind}.{i}.npy"),
                            t.detach().cpu().numpy())
                    state["seq"] += 1

        def forward_hook(name):
            def fn(module, inputs, output):
                outs = output if isinstance(output, (tuple, list)) else (output,)
                save(name, "input", inputs)
                save(name, "parameter", list(module.parameters(recurse=False)))
                save(name, "output", outs)
            return fn

        def backward_hook(name):
            def fn(module, grad_input, grad_output):
                save(name, "grad_output", grad_output)
                save(name, "grad_input", grad_input)
            return fn

        leaves = [(n, m) for n, m in net.named_modules() if not list(m.children())]
        # Full backward hooks refuse in-place modules ("Output 0 of BackwardHookFunctionBackward
        # is a view and is being modified inplace"): a user turns them off, in both runs.
        for _, m in leaves:
            if getattr(m, "inplace", False):
                m.inplace = False
        seconds = 0.0
        for step in range(STEPS):
            if step == 1 and capture:
                for n, m in leaves:
                    handles.append(m.register_forward_hook(forward_hook(n)))
                    handles.append(m.register_full_backward_hook(backward_hook(n)))
            state["step"] = step
            if capture:
                os.makedirs(os.path.join(out_dir, str(step)), exist_ok=True)
            start = time.monotonic()
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            params = list(net.named_parameters())
            if capture and step >= 1:
                save("optimizer", "gradient", [p.grad for _, p in params])
            opt.step()
            if capture and step >= 1:
                save("optimizer", "updated", [p for _, p in params])
            if step >= 1:
                seconds += time.monotonic() - start
        for h in handles:
            h.remove()
        return seconds

    return run(False), run(True)


def main():
    work = tempfile.mkdtemp(prefix="graphdump_hook_bench_", dir=os.environ.get("BENCH_DIR"))
    try:
        model = benchutil.make_model(work, MODEL)
        torch.manual_seed(0)
        x = torch.randn(*SHAPE)
        y = torch.randint(0, CLASSES, (SHAPE[0],))
        data, labels = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
        np.save(data, x.numpy())
        np.save(labels, y.numpy())
        graphdump_train(model, data, labels, None, work)  # warm the page cache
        modes = (("asynchronous", True, ""), ("synchronous", False, "_sync"))
        ratios = {suffix: [] for _, _, suffix in modes}
        for round_index in range(ROUNDS):
            # One round: the hooks, then each graphdump mode, each against its own undumped
            # training run right before it.
            hook_dir = os.path.join(work, "hooks")
            plain, hooked = hook_train(model, x, y, hook_dir)
            hook_bytes = benchutil.npy_bytes(hook_dir)
            benchutil.remove_tree(hook_dir)
            hook_seconds = max(hooked - plain, 1e-3)
            hook_spb = hook_seconds / hook_bytes
            print(f"hook_numpy_capture: round {round_index + 1}/{ROUNDS}: module hooks + "
                  f"numpy.save {hook_bytes / 1e6:.1f} MB in +{hook_seconds:.2f} s "
                  f"({plain:.2f} s -> {hooked:.2f} s): {hook_spb * 1e9:.3f} ns/byte")
            for mode, asynchronous, suffix in modes:
                dump_dir = os.path.join(work, "graphdump_" + mode)
                config = benchutil.write_dump_config(os.path.join(work, mode + ".json"),
                                                     dump_dir, "tensor", f"1-{STEPS - 1}",
                                                     asynchronous=asynchronous)
                gd_base = graphdump_train(model, data, labels, None, work)
                gd_dump = graphdump_train(model, data, labels, config, work)
                gd_bytes = benchutil.npy_bytes(dump_dir)
                benchutil.remove_tree(dump_dir)
                gd_seconds = max(gd_dump - gd_base, 1e-3)
                gd_spb = gd_seconds / gd_bytes
                ratios[suffix].append(hook_spb / gd_spb)
                print(f"hook_numpy_capture: round {round_index + 1}/{ROUNDS}: graphdump {mode} "
                      f"(forward+backward+optimizer) {gd_bytes / 1e6:.1f} MB in "
                      f"+{gd_seconds:.2f} s ({gd_base:.2f} s -> {gd_dump:.2f} s wall): "
                      f"{gd_spb * 1e9:.3f} ns/byte")
                if gd_bytes <= hook_bytes:
                    sys.exit(f"hook_numpy_capture: graphdump wrote {gd_bytes} bytes, not more "
                             f"than the hooks' {hook_bytes}")
        print(f"hook_numpy_capture: {MODEL} batch {'x'.join(map(str, SHAPE))}, {STEPS} steps, "
              f"steps 1..{STEPS - 1} captured; per-round ratios (hook s/byte over graphdump "
              f"s/byte): " + "; ".join(
                  f"{mode} " + ", ".join(f"{r:.2f}" for r in ratios[suffix])
                  for mode, _, suffix in modes))
        for _, _, suffix in modes:
            print(f"bench: graphdump_vs_hook_numpy{suffix} "
                  f"ratio={statistics.median(ratios[suffix]):.3f}")
    finally:
        benchutil.remove_tree(work)


if __name__ == "__main__":
    main()
