"""`graphdump run MODEL.pt2`: an exported program (torch.export.save) run node by node
(docs/cli-run-train.md, "Exported programs"). Checked here, on a small convolutional network
exported in the test:
  - every ATen node of the program's graph is a kernel, named by its module
    (Default/conv-Conv2d/conv2d-op0), with the test's lines in the .ir;
  - each kernel's dumped output equals the same node's value when ExportedProgram.module()
    runs on the same input, and its inputs are its producers' outputs; each step is an
    iteration; --save-output is module()'s output;
  - the configuration applies (a kernel selected by name alone is dumped);
  - the options of TorchScript models are refused with a .pt2 (exit 2), as is a file that is
    not an exported program.
"""
import glob
import os
import re

import numpy as np
import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from conftest import execution_order, graphdump, marked_line, write_config

HERE = os.path.abspath(__file__)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.norm = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        h = F.relu(self.norm(self.conv(x)))  # line: relu
        return self.fc(h.flatten(1)).softmax(-1)  # line: softmax


def node_values(module, x):
    """Each ATen node's value when `module` runs on x, in graph order."""
    values = []

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                values.append((n.name, out))
            return out

    Recorder(module).run(x)
    return values


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net().eval()
    with torch.no_grad():
        model.norm.running_mean.uniform_(-0.5, 0.5)
        model.norm.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 8, 8)
    program = torch.export.export(model, (x,))
    torch.export.save(program, str(tmp / "net.pt2"))
    np.save(tmp / "x.npy", x.numpy())
    loaded = torch.export.load(str(tmp / "net.pt2"))
    with torch.no_grad():
        reference = node_values(loaded.module(), x)
        output = loaded.module()(x)
    config = write_config(tmp / "full.json", tmp / "dump", {"saved_data": "tensor"})
    run = graphdump("run", tmp / "net.pt2", "--input", tmp / "x.npy", "--config", config,
                    "--steps", "2", "--save-output", tmp / "out.npy", check=0)
    return {"tmp": tmp, "reference": reference, "output": output.numpy(), "run": run,
            "rank": tmp / "dump" / "rank_0"}


def kernel_file(rank, iteration, full_name, io, slot):
    op_type = full_name.rsplit("/", 1)[1].rsplit("-op", 1)[0]
    name = re.sub(r"[/\\. ]", "_", full_name)
    found = glob.glob(str(rank / "Net" / "0" / str(iteration) /
                          f"{op_type}.{name}.0.0.*.{io}.{slot}.*.npy"))
    assert len(found) == 1, (full_name, io, slot, found)
    return np.load(found[0])


def test_every_node_is_a_kernel_named_by_its_module(exported):
    order = execution_order(exported["rank"], 0)
    assert order == ["Default/conv-Conv2d/conv2d-op0",
                     "Default/norm-BatchNorm2d/batch_norm-op1",
                     "Default/relu-op2", "Default/flatten-op3", "Default/fc-Linear/linear-op4",
                     "Default/softmax-op5"], order
    assert len(order) == len(exported["reference"])
    ir = (exported["rank"] / "graphs" / "ms_output_trace_code_graph_0.ir").read_text()
    relu = ir.split("(Default/relu-op2)")[1].split("\n  %")[0]
    assert f"test_export_run.py({marked_line(HERE, 'relu')})" in relu, relu
    # Its input is the batch norm's output, by the kernel that produced it.
    assert "relu(%Default/norm-BatchNorm2d/batch_norm-op1)" in ir, ir


def test_each_kernels_output_equals_the_programs_node(exported):
    rank, order = exported["rank"], execution_order(exported["rank"], 0)
    assert sorted(os.listdir(rank / "Net" / "0")) == ["0", "1"]
    for iteration in (0, 1):
        previous = None
        for full_name, (node, value) in zip(order, exported["reference"]):
            out = kernel_file(rank, iteration, full_name, "output", 0)
            assert out.shape == tuple(value.shape), (full_name, node)
            assert np.array_equal(out, value.numpy()), (full_name, node)
            if previous is not None:  # a chain: each kernel reads the one before it
                assert np.array_equal(kernel_file(rank, iteration, full_name, "input", 0),
                                      previous), full_name
            previous = out
    assert np.array_equal(np.load(exported["tmp"] / "out.npy"), exported["output"])
    assert "step 2/2: tensor [2, 5] float32" in exported["run"].stdout, exported["run"].stdout


def test_configuration_selects_kernels(exported):
    tmp = exported["tmp"]
    config = write_config(tmp / "one.json", tmp / "one",
                          {"dump_mode": 1, "kernels": ["Default/fc-Linear/linear-op4"],
                           "input_output": 2})
    graphdump("run", tmp / "net.pt2", "--input", tmp / "x.npy", "--config", config, check=0)
    files = [os.path.basename(f) for f in glob.glob(str(tmp / "one" / "rank_0" / "Net" / "0" /
                                                         "0" / "*.npy"))]
    assert [f for f in files if not f.startswith("Parameter.")] and all(
        f.startswith("linear.Default_fc-Linear_linear-op4.") and ".output.0." in f
        for f in files if not f.startswith("Parameter.")), files
    linear = dict(exported["reference"])["linear"].numpy()
    found = [f for f in files if f.startswith("linear.")]
    assert np.array_equal(np.load(tmp / "one" / "rank_0" / "Net" / "0" / "0" / found[0]), linear)


def test_torchscript_options_and_foreign_files_are_refused(exported):
    tmp = exported["tmp"]
    p = graphdump("run", tmp / "net.pt2", "--precision", "bf16", check=2)
    assert "--precision: not an option for an exported program (.pt2)" in p.stderr, p.stderr
    # train is the TorchScript trainer: an exported program is refused with why (exit 2).
    p = graphdump("train", tmp / "net.pt2", "--steps", "1", check=2)
    assert (f"{tmp / 'net.pt2'} is an exported program (torch.export.save): train takes "
            "TorchScript files") in p.stderr, p.stderr
    (tmp / "bad.pt2").write_bytes(b"not a zip archive")
    p = graphdump("run", tmp / "bad.pt2", check=2)
    assert "bad.pt2: not an exported program" in p.stderr, p.stderr
