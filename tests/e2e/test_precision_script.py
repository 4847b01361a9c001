"""Precision runs and bisection of a user's own script (docs/precision.md, "Precision runs of a
script"): `graphdump python --precision bf16` on an unchanged training script dumps its kernels
in bfloat16 and its parameters rounded to bfloat16 (checked with NumPy against the float32
run's dump); `--keep-fp32` of one kernel and of one parameter is honoured (both dumped as
float32, the parameter with its float32 values); an entry that matches nothing is an error
(exit 2) naming it and what exists nearby. `graphdump bisect -- script` on an eager script of
the positional-encoding model finds the set bisect finds on its `.pt`, and the command it prints
brings the script's output under the tolerance (NumPy against the script's own float32 output);
a script whose kernels change between rounds is told so."""
import glob
import json
import os
import shlex
import sys

import numpy as np
import pytest

import gdtest as t
import precision_fixture as p

TRAIN = '''
import torch, torch.nn as nn
torch.manual_seed(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 8)
y = torch.randint(0, 4, (32,))
for step in range(2):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("loss", step, float(loss))
'''

POS = '''
import sys
import numpy as np
import torch
sys.path.insert(0, {models_dir!r})
from precision_models import PosEnc
torch.manual_seed(3)  # as precision_models.make seeds pos_enc.pt
model = PosEnc().eval()
mask = torch.ones(1024)
out = model(mask)
np.save(sys.argv[1], out.detach().float().numpy())
'''

# Calls one more kernel from its third run on (a counter file beside it): not the same kernels.
CHANGING = '''
import os, torch, torch.nn as nn
counter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs.txt")
runs = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(runs + 1))

class Net(nn.Module):
    def forward(self, x):
        y = torch.sin(x * 1000.0)
        return torch.cos(y) if runs >= 2 else y

Net()(torch.linspace(0, 1, 64))
'''


def write(work, name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def bf16_round(a):
    """float32 -> nearest bfloat16 (ties to even), as float32: NumPy only."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def python_dump(work, name, *options):
    dump = os.path.join(work, name)
    cfg = t.write_config(os.path.join(work, name + ".json"), dump,
                         {"net_name": "Net", "iteration": "0"})
    code, out, err = t.run("python", "--config", cfg, *options, env=p.ONE_THREAD)
    return code, out, err, os.path.join(dump, "rank_0")


def files(rank, pattern):
    return sorted(glob.glob(os.path.join(rank, "Net", "0", "0", pattern)))


def parameter(rank, name):
    found = files(rank, f"Parameter.{name}.*.npy")
    return (np.load(found[0]), p.dtype_of(found[0])) if found else (None, None)


def output(rank, kernel, slot=0, io="output"):
    stem = kernel.replace("/", "_").replace(".", "_")
    found = files(rank, f"*.{stem}.*.{io}.{slot}.*.npy")
    return found[0] if found else None


LINEAR = "Default/fc1-Linear/linear-op0"
LAST = "Default/fc2-Linear/linear-op2"


@pytest.fixture(scope="module")
def fp32(module_scratch):
    """The training script, and its float32 run: (script, exit status, stdout, stderr, rank
    directory)."""
    train = write(module_scratch, "train.py", TRAIN)
    code, out32, err, ref = python_dump(module_scratch, "fp32", train)
    return train, code, out32, err, ref


@pytest.fixture(scope="module")
def bf16(module_scratch, fp32):
    """The bf16 run of the script: (exit status, stdout, stderr, rank directory)."""
    return python_dump(module_scratch, "bf16", "--precision", "bf16", fp32[0])


def test_fp32_run(fp32):
    train, code, out32, err, ref = fp32
    linear, last = LINEAR, LAST
    assert code == 0, f"float32 run: {err[-600:]}"
    assert output(ref, linear) and output(ref, last), (
        f"kernels named as expected: "
        f"{os.listdir(os.path.join(ref, 'Net', '0', '0'))[:8]}")


def test_bf16_rounds_kernels_and_parameters(fp32, bf16):
    train, _, out32, _, ref = fp32
    code, out, err, low = bf16
    linear, last = LINEAR, LAST
    assert code == 0, f"bf16 run: {err[-600:]}"
    for kernel in (linear, "Default/relu-op1", last):
        f = output(low, kernel)
        assert f is not None and p.dtype_of(f) == "bfloat16", f"{kernel} output in bf16: {f}"
    for name in ("fc1_weight", "fc1_bias", "fc2_weight"):
        v32, d32 = parameter(ref, name)
        v16, d16 = parameter(low, name)
        assert (d32, d16) == ("float32", "bfloat16"), f"{name} dtypes"
        if v32 is not None and v16 is not None:
            assert np.array_equal(v16, bf16_round(v32)) and not np.array_equal(v16, v32), (
                f"{name} is the float32 value rounded to bfloat16")
    # Inputs are dumped as the kernel computed on them: the script's float32 data rounded.
    f, f32 = output(low, linear, io="input"), output(ref, linear, io="input")
    assert (f is not None and f32 is not None and p.dtype_of(f) == "bfloat16" and
            np.array_equal(np.load(f), bf16_round(np.load(f32)))), (
        f"{linear} input 0 dumped as the bf16 values it computed on: {f}")
    losses32 = [float(l.split()[2]) for l in out32.splitlines() if l.startswith("loss")]
    losses16 = [float(l.split()[2]) for l in out.splitlines() if l.startswith("loss")]
    assert (len(losses16) == 2 and losses16 != losses32 and
            abs(losses16[0] - losses32[0]) < 0.05 * abs(losses32[0])), (
        f"bf16 losses near, not equal to, float32: {losses16} vs {losses32}")


def test_bf16_losses_are_a_hand_cast_models(module_scratch, bf16):
    out = bf16[1]
    # A real bfloat16 model (the same script casting its model and data by hand) trains to the
    # same losses, bit for bit.
    by_hand = write(module_scratch, "train_bf16.py", TRAIN.replace(
        "x = torch.randn(32, 8)\n",
        "x = torch.randn(32, 8).to(torch.bfloat16)\nmodel = model.to(torch.bfloat16)\n"))
    code, out_hand, err = t.run("python", by_hand, env=p.ONE_THREAD)
    hand = [l for l in out_hand.splitlines() if l.startswith("loss")]
    assert (code == 0 and len(hand) == 2 and
            hand == [l for l in out.splitlines() if l.startswith("loss")]), (
        f"the bf16 run's losses are a hand-cast bf16 model's: {hand} {err[-300:]}")


def test_keep_fp32_of_a_kernel_and_a_parameter(module_scratch, fp32):
    train, _, _, _, ref = fp32
    linear, last = LINEAR, LAST
    # --keep-fp32 one kernel and one parameter.
    code, out, err, kept = python_dump(module_scratch, "kept", "--precision", "bf16",
                                       "--keep-fp32", last, "fc1.weight", train)
    assert code == 0, f"kept run: {err[-600:]}"
    f = output(kept, last)
    assert f is not None and p.dtype_of(f) == "float32", f"{last} kept in float32: {f}"
    f = output(kept, linear)
    assert f is not None and p.dtype_of(f) == "bfloat16", f"{linear} still bf16: {f}"
    f, f16 = output(kept, last, io="input"), output(kept, "Default/relu-op1")
    assert (f is not None and f16 is not None and p.dtype_of(f) == "float32" and
            np.array_equal(np.load(f), np.load(f16))), (
        f"{last} input: the bf16 relu output cast up to float32: {f}")
    v32, _ = parameter(ref, "fc1_weight")
    vk, dk = parameter(kept, "fc1_weight")
    assert dk == "float32" and vk is not None and np.array_equal(vk, v32), (
        f"fc1.weight kept with its float32 values ({dk})")
    assert parameter(kept, "fc2_weight")[1] == "bfloat16", "fc2.weight not kept"


def test_unknown_entry_steps_and_usage(module_scratch, fp32):
    train, _, out32, _, _ = fp32
    last = LAST
    # An entry that matches nothing: exit 2, named, with what exists nearby.
    code, _, err, _ = python_dump(module_scratch, "unknown", "--precision", "bf16", "--keep-fp32",
                                  "Default/fc2-Linear/linaer-op2", train)
    assert (code == 2 and "'Default/fc2-Linear/linaer-op2'" in err and "nearby" in err and
            last in err), (
        f"unknown entry: {code} {err[-600:]}")
    # --steps 2 ends the script in its second optimizer step (the print after it does not run),
    # exit 0; fp32 is the plain run.
    code, out, err = t.run("python", "--precision", "fp32", "--steps", "2", train,
                           env=p.ONE_THREAD)
    assert (code == 0 and [l for l in out.splitlines() if l.startswith("loss")] ==
            [l for l in out32.splitlines() if l.startswith("loss")][:1]), (
        f"--steps 2: {code} {out} {err[-300:]}")
    code, _, err = t.run("python", "--keep-fp32", "relu", train)
    assert code == 2 and "--precision" in err, f"--keep-fp32 without --precision: {err}"


def test_bisect_of_a_script(module_scratch):
    # bisect -- script finds the set bisect finds on the .pt.
    code, out, err = t.run("bisect", p.model("pos_enc"), "--input", p.data("pos_x.npy"),
                           "--precision", "bf16", "--json", env=p.ONE_THREAD)
    assert code == 0, f"bisect pos_enc.pt: {err[-600:]}"
    pt = json.loads(out)
    pos = write(module_scratch, "pos_script.py", POS.format(models_dir=p.HERE))
    saved = os.path.join(module_scratch, "pos_out.npy")
    code, out, err = t.run("bisect", "--precision", "bf16", "--json", "--", pos, saved,
                           env=p.ONE_THREAD)
    assert code == 0, f"bisect -- script: {err[-1500:]}"
    script = json.loads(out) if code == 0 else {}
    keep_pt = [k["full_name"] for k in pt["keep"]]
    keep_script = [k["full_name"] for k in script.get("keep", [])]
    assert keep_script == keep_pt and "freqs" in keep_script, (
        f"the same set: script {keep_script}, .pt {keep_pt}")
    assert abs(script.get("error_none", 0) - pt["error_none"]) < 1e-6, (
        f"the same bf16 error: {script.get('error_none')} vs {pt['error_none']}")
    sin = [k for k in script.get("keep", []) if k["op_type"] == "sin"]
    assert (sin and sin[0]["source_line"].endswith(
            f"precision_models.py:{p.source_line('SIN_LINE')}")), (
        f"source line of sin: {sin}")

    # The printed command brings the script's own output under the tolerance.
    words = shlex.split(script.get("command") or "graphdump")
    assert words[:4] == ["graphdump", "python", "--precision", "bf16"], (
        f"a graphdump python command: {words}")
    reference = os.path.join(module_scratch, "pos_ref.npy")
    code, _, err = t.run("python", pos, reference, env=p.ONE_THREAD)
    assert code == 0, f"float32 script: {err[-300:]}"
    assert len(words) > 4, f"the command keeps kernels: {words}"
    code, _, err = t.run(*words[1:], env=p.ONE_THREAD)
    assert code == 0, f"the printed command: {err[-300:]}"
    fixed = p.norm_rel(np.load(saved), np.load(reference))
    assert fixed <= 0.01, f"the printed command's error {fixed} <= 0.01"
    code, _, err = t.run("python", "--precision", "bf16", pos, saved, env=p.ONE_THREAD)
    plain = p.norm_rel(np.load(saved), np.load(reference))
    assert plain > 0.1, f"plain bf16 error {plain} is large"


def test_kernels_that_change_between_rounds(module_scratch):
    # Kernels that change between rounds: told so, exit 2.
    changing = write(module_scratch, "changing.py", CHANGING)
    code, out, err = t.run("bisect", "--precision", "bf16", "--", changing, env=p.ONE_THREAD)
    assert code == 2 and "kernels changed between rounds" in err and "cos" in err, (
        f"changing kernels: {code} {err[-600:]}")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
