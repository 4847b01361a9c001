"""Fidelity of `graphdump run`: for scripted alexnet, resnet18, mobilenet_v2 (torchvision's
architectures, defined in examples/) and a scripted if/loop model, the dumped output of the last
kernel of each leaf module equals, bit for bit, that module's output captured in Python with a
forward hook (eager module, weights of the same .pt, same input); the final output equals the
TorchScript module's forward."""
import glob
import os
import re
import sys

import numpy as np
import pytest
import torch

import gdmodels
import gdtest

CASES = [("ifloop", (2, 8)), ("alexnet", (1, 3, 64, 64)), ("resnet18", (1, 3, 64, 64)),
         ("mobilenet_v2", (1, 3, 64, 64))]
OWN_KERNEL = re.compile(r"^[A-Za-z0-9_]+-op\d+$")
NAME = re.compile(r"^[^.]+\.(?P<op>[^.]+)\.0\.0\.(?P<ts>\d+)\.output\.(?P<slot>\d+)\.")


def leaf_outputs(module, x):
    captured = {}
    hooks = []
    for path, sub in module.named_modules():
        if path and not list(sub.children()):
            def hook(mod, inputs, output, path=path):
                captured[path] = output.detach().clone()
            hooks.append(sub.register_forward_hook(hook))
    with torch.no_grad():
        final = module(x)
    for h in hooks:
        h.remove()
    return captured, final


def last_output_file(step_dir, prefix):
    """The output.0 file of the last kernel (highest op number, then latest run) under prefix."""
    best = None
    for path in glob.glob(os.path.join(step_dir, "*.output.0.*.npy")):
        m = NAME.match(os.path.basename(path))
        op = m.group("op")
        # The kernel itself, not one of a nested module: "{op_type}-op{N}" after the prefix.
        if not op.startswith(prefix) or not OWN_KERNEL.match(op[len(prefix):]):
            continue
        key = (int(op.rsplit("-op", 1)[1]), int(m.group("ts")))
        if best is None or key > best[0]:
            best = (key, path)
    return best[1] if best else None


@pytest.mark.parametrize("name, shape", CASES)
def test_run_matches_forward_hooks(name, shape):
    tmp = gdtest.temp_dir()
    try:
        torch.manual_seed(1)
        x = torch.randn(*shape)
        np.save(os.path.join(tmp, "x.npy"), x.numpy())
        cfg = gdtest.write_config(os.path.join(tmp, "dump.json"), os.path.join(tmp, "dump"),
                                  {"input_output": 2})
        out = os.path.join(tmp, "out.npy")
        gdtest.run("run", gdmodels.model_path(name), "--input", os.path.join(tmp, "x.npy"),
                   "--config", cfg, "--save-output", out, env=gdmodels.env_one_thread(), check=0)
        torch.set_num_threads(1)
        scripted = torch.jit.load(gdmodels.model_path(name))
        with torch.no_grad():
            expected_final = scripted(x)
        assert np.array_equal(np.load(out), expected_final.numpy()), (
            f"{name}: final output differs from module.forward")
        eager = gdmodels.eager_with_weights(name)
        captured, eager_final = leaf_outputs(eager, x)
        assert np.array_equal(np.load(out), eager_final.numpy()), (
            f"{name}: final output differs from the eager module")
        step_dir = os.path.join(tmp, "dump", "rank_0", "Net", "0", "0")
        compared = 0
        for path, expected in captured.items():
            f = last_output_file(step_dir, gdmodels.scope_prefix(eager, path))
            if f is None:
                continue  # a leaf module without kernels (nn.Identity, nn.Flatten as a view)
            compared += 1
            got = np.load(f)
            assert got.shape == tuple(expected.shape) and np.array_equal(got, expected.numpy()), (
                f"{name}: module {path}: {os.path.basename(f)} differs from the "
                f"forward hook's output (max abs diff "
                f"{np.abs(got.astype(np.float64) - expected.numpy()).max() if got.shape == tuple(expected.shape) else 'shape'})")
        assert compared >= len(captured) * 0.8, (
            f"{name}: only {compared} of {len(captured)} leaf modules found in the dump")
        print(f"{name}: {compared} leaf modules compared bit for bit")
    finally:
        gdtest.cleanup(tmp)


class PairOut(torch.nn.Module):
    def forward(self, x):
        return x + 1, x * 2


def test_save_output_errors():
    """--save-output: a path that cannot be written is refused before the run; an output that is
    not a tensor is an error, not a silently missing file."""
    tmp = gdtest.temp_dir()
    try:
        bad = os.path.join(tmp, "no", "out.npy")
        rc, out, err = gdtest.run("run", gdmodels.model_path("ifloop"), "--input-shape", "2x8",
                                  "--save-output", bad)
        assert (rc == 2 and f"--save-output {bad}: directory {os.path.dirname(bad)}: "
                "No such file or directory" in err and "step" not in out), (
            f"--save-output into a missing directory: exit {rc}\n{out}{err}")
        pair = os.path.join(tmp, "pair.pt")
        torch.jit.script(PairOut()).save(pair)
        saved = os.path.join(tmp, "out.npy")
        rc, out, err = gdtest.run("run", pair, "--input-shape", "2x3", "--save-output", saved)
        assert (rc == 2 and "the model's output is a Tuple, not a tensor" in err
                and "step 1/1" in out and not os.path.exists(saved)), (
            f"--save-output of a tuple output: exit {rc}\n{out}{err}")
    finally:
        gdtest.cleanup(tmp)



if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
