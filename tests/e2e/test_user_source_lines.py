"""Printed source lines point at the user's code: a model defined in this file, whose kernels
come from a module call, F.relu and torch.log, saved as a TorchScript archive. --list-kernels,
watch and trace name this file's lines (not torch's), F.relu keeps its call site, backward
kernels carry their forward kernel's line, and the kernel of F.relu's untaken in-place branch is
marked as not run."""
import json
import os
import re
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gdtest


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x):
        h = F.relu(self.conv1(x))  # LINE_RELU
        y = torch.log(h - 0.5)  # LINE_LOG
        return self.fc(torch.flatten(y, 1))


def line_of(marker):
    with open(__file__) as f:
        return next(i for i, text in enumerate(f, 1) if f"# {marker}" in text)


HERE = os.path.basename(__file__)
RELU, LOG = line_of("LINE_RELU"), line_of("LINE_LOG")


@pytest.fixture(scope="module")
def model():
    """(tmp, the TorchScript archive of Net)."""
    tmp = gdtest.temp_dir()
    torch.manual_seed(0)
    path = os.path.join(tmp, "net.pt")
    torch.jit.script(Net()).save(path)
    yield tmp, path
    gdtest.cleanup(tmp)


@pytest.fixture(scope="module")
def root(model):
    """A statistic dump of one training step of Net."""
    tmp, path = model
    config = gdtest.write_config(os.path.join(tmp, "d.json"), os.path.join(tmp, "dump"),
                                 {"saved_data": "statistic"})
    gdtest.run("train", path, "--steps", 1, "--input-shape", "2x3x8x8", "--classes", 2,
               "--config", config)
    return os.path.join(tmp, "dump")


def test_list_kernels_names_this_file(model):
    _, out, _ = gdtest.run("run", model[1], "--list-kernels", "--input-shape", "2x3x8x8",
                           check=0)
    rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
    by_type = lambda t: [r for name, r in rows.items() if re.search(rf"/{t}-op\d+$", name)]
    for kernel_type, line in (("conv2d", RELU), ("relu", RELU), ("relu_", RELU), ("log", LOG)):
        found = by_type(kernel_type)
        assert found and all(f"{HERE}:{line} " in r[2] for r in found), (
            f"--list-kernels: {kernel_type} at {HERE}:{line}: {found}")
    assert all(len(r) == 4 and "not run" in r[3] for r in by_type("relu_")), (
        f"the in-place branch of F.relu is marked not run: {by_type('relu_')}")
    assert all(len(r) == 3 for r in by_type("relu")), "the relu that ran is not marked"


def test_ir_marks_the_untaken_branch_not_run(root):
    ir = open(os.path.join(root, "rank_0", "graphs", "ms_output_trace_code_graph_0.ir")).read()
    assert re.search(r"relu_\(.*\n\s+: not run \(a branch not taken so far\)", ir), (
        "the .ir marks relu_ as not run")


def test_watch_names_the_log_line(root):
    # The log of values below 0.5 makes the first NaN: watch names this file's line.
    code, out, _ = gdtest.run("watch", root, "--check", "nan", "-q")
    assert code == 1, f"watch finds the NaN: exit {code}\n{out}"
    first = next((l for l in out.splitlines() if l.startswith("first hit")), "")
    assert "/log-op" in first and f"{HERE}:{LOG}" in first, (
        f"watch's first hit is the log kernel at {HERE}:{LOG}: {first}")


def test_json_keeps_the_whole_stack(root):
    # --json keeps the whole stack, innermost first (torch's own frames, then this file's).
    _, out, _ = gdtest.run("watch", root, "--check", "nan", "-q", "--json")
    hit = json.loads(out)["first_hit"]
    frames = [(os.path.basename(f["file"]), f["line"]) for f in hit["source_trace"]]
    assert (HERE, LOG) in frames, f"watch --json has the trace: {frames}"
    assert hit["source_line"].endswith(f"{HERE}:{LOG}"), "source_line is the user's frame"
    _, out, _ = gdtest.run("trace", root, f"{HERE}:{RELU}", "--json", check=0)
    conv = [m for m in json.loads(out) if re.match(r"^Default/conv1-Conv2d/conv2d-op\d+$",
                                                   m["kernel"])]
    frames = [(f["file"], f["line"]) for f in conv[0]["source_trace"]] if conv else []
    assert (len(frames) >= 2 and frames[0][0].endswith("torch/nn/modules/conv.py") and
            (HERE, RELU) in [(os.path.basename(f), l) for f, l in frames]), (
        f"trace --json has conv2d's whole trace, torch's frame first: {frames}")


def test_trace_lists_forward_and_backward_kernels(root):
    # trace of the F.relu line: its forward kernels and the backward kernels made from them.
    _, out, _ = gdtest.run("trace", root, f"{HERE}:{RELU}", check=0)
    kernels = re.findall(r"graph \d+: (\S+)", out)
    for expected in (r"^Default/conv1-Conv2d/conv2d-op\d+$", r"^Default/relu-op\d+$",
                     r"^Gradients/Default/ReluBackward0-op\d+$",
                     r"^Gradients/Default/conv1-Conv2d/ConvolutionBackward0-op\d+$"):
        assert any(re.match(expected, k) for k in kernels), (
            f"trace {HERE}:{RELU} lists {expected}: {kernels}")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
