"""The explicit API (graphdump.torch.Dump): two scripted modules as two graphs, set_dump, a
traced module, and every configuration feature, checked on the files as a user reads them."""
import glob
import json
import os
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import graphdump
import graphdump.torch as gd
from conftest import every_npy_loads, execution_order, global_order, write_config


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.features(x))


class SquaredError(nn.Module):
    def forward(self, out, target):
        diff = out - target
        return (diff * diff).mean()


def batches(n=3):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(4, 6, generator=g), torch.randn(4, 2, generator=g)) for _ in range(n)]


def train(dump, steps=3, model=None, set_dump=None, eager=False):
    """Trains Model with SquaredError, both wrapped: TorchScript, or plain modules (eager)."""
    torch.manual_seed(0)
    script = (lambda m: m) if eager else torch.jit.script
    model = dump.wrap(model if model is not None else script(Model()))
    loss_fn = dump.wrap(script(SquaredError()))
    if set_dump is not None:
        dump.set_dump(set_dump(model))
    optimizer = dump.track(torch.optim.SGD(model.parameters(), lr=0.1))
    for x, y in batches(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return model


def names(directory, io=None):
    """'{op_type}.{op_name}' of the tensor files in a directory (io: only inputs or outputs)."""
    out = set()
    for f in os.listdir(directory):
        parts = f.split(".")
        if f.endswith(".npy") and (io is None or parts[5] == io):
            out.add(".".join(parts[:2]))
    return out


def test_model_and_loss_are_two_graphs(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    with gd.Dump(config) as dump:
        train(dump)
    assert dump.summary["graphs"] == 2 and dump.summary["optimizer_steps"] == 3
    rank = tmp_path / "dump" / "rank_0"
    for graph in (0, 1):
        assert sorted(os.listdir(rank / "Net" / str(graph))) == ["0", "1", "2", "constants"] \
            or sorted(os.listdir(rank / "Net" / str(graph))) == ["0", "1", "2"]
        assert global_order(rank, graph) == [0, 1, 2]
    model_order, loss_order = execution_order(rank, 0), execution_order(rank, 1)
    assert model_order[0] == "Default/features-Sequential/0-Linear/linear-op0"
    assert loss_order[0] == "Default/sub-op0"
    # Backward nodes belong to the graph whose kernel made them, updates to the parameter's.
    assert any(k.startswith("Gradients/Default/MulBackward0") for k in loss_order), loss_order
    assert any(k.startswith("Gradients/Default/head-Linear/AddmmBackward0") for k in model_order)
    assert any(k.startswith("Default/optimizer-SGD/head_weight/SGD-op") for k in model_order)
    assert not any("optimizer" in k for k in loss_order)
    # The loss's output is the model's backward root's input: its gradient flows into graph 0.
    it1 = rank / "Net" / "1" / "1"
    loss_out = np.load(glob.glob(f"{it1}/mean.Default_mean-op*.output.0.*.npy")[0])
    assert loss_out.shape == ()
    assert every_npy_loads(rank) > 40


@pytest.mark.parametrize("eager", [False, True])
def test_set_dump_selects_a_submodule_and_its_gradients_and_updates(tmp_path, eager):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"dump_mode": 2})
    with gd.Dump(config) as dump:
        train(dump, steps=1, set_dump=lambda m: m.head, eager=eager)
    files = names(tmp_path / "dump" / "rank_0" / "Net" / "0" / "0")
    kernels = {f for f in files if not f.startswith("Parameter.")}
    assert kernels, files
    assert all("head" in k for k in kernels), kernels
    assert any(k.startswith("linear.Default_head-Linear") for k in kernels)
    assert any(k.startswith("AddmmBackward0.Gradients_Default_head-Linear") for k in kernels)
    assert any(k.startswith("SGD.Default_optimizer-SGD_head_weight") for k in kernels)
    # The loss graph has no marked module: nothing of it is dumped.
    assert not glob.glob(str(tmp_path / "dump" / "rank_0" / "Net" / "1" / "0" / "*.npy"))


def test_traced_module(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    torch.manual_seed(0)
    traced = torch.jit.trace(Model(), torch.randn(4, 6))
    with gd.Dump(config) as dump:
        train(dump, steps=2, model=traced)
    rank = tmp_path / "dump" / "rank_0"
    order = execution_order(rank, 0)
    assert any(k.startswith("Default/features-Sequential/0-Linear/linear-op") for k in order), order
    ir = (rank / "graphs" / "ms_output_trace_code_graph_0.ir").read_text()
    assert "test_api.py" in ir  # the traced module's user frames
    assert every_npy_loads(rank) > 20


def test_wrap_takes_modules_and_refuses_what_is_not_one():
    with gd.Dump(None) as dump:
        plain = Model()
        assert dump.wrap(plain) is plain
        ddp_class = torch.nn.DataParallel
        with pytest.raises(TypeError, match=r"wrap the module inside it: "
                                            r"DataParallel\(dump.wrap\(net\)\)"):
            dump.wrap(ddp_class(Model()))
        with pytest.raises(TypeError, match="expected a torch.nn.Module"):
            dump.wrap(lambda x: x)
        with pytest.raises(TypeError, match="expected a torch.optim.Optimizer"):
            dump.track(Model())


def test_dumping_does_not_change_the_training(tmp_path):
    # Whether and what a run dumps never changes what it computes.
    results = []
    for common in (None, {"iteration": "1"}, {"saved_data": "statistic"}):
        if common is None:
            dump = gd.Dump(None)
        else:
            dump = gd.Dump(write_config(tmp_path / f"d{len(results)}.json",
                                        tmp_path / f"dump{len(results)}", common))
        with dump:
            model = train(dump)
        results.append([p.detach().clone() for p in model.parameters()])
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))


def dump_files(root):
    """Relative paths of tensor files with the timestamp taken out, and their arrays."""
    out = {}
    for f in glob.glob(os.path.join(root, "**", "*.npy"), recursive=True):
        rel = os.path.relpath(f, root).split(".")
        if len(rel) > 6 and rel[0] != "Parameter" or rel[0] == "Parameter":
            rel[4] = "T"
        out[".".join(rel)] = np.load(f)
    return out


def test_asynchronous_mode_writes_what_synchronous_mode_writes(tmp_path):
    runs = []
    for enable in (True, False):
        root = tmp_path / f"dump_{enable}"
        config = write_config(tmp_path / f"d{enable}.json", root, e2e={"enable": enable})
        with gd.Dump(config) as dump:
            train(dump)
        runs.append(dump_files(str(root)))
    assert runs[0].keys() == runs[1].keys() and len(runs[0]) > 50
    for key, value in runs[0].items():
        assert np.array_equal(value, runs[1][key], equal_nan=True), key


def test_statistic_only_kernel_selection_iterations_and_outputs(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {
        "dump_mode": 1, "kernels": ["relu", "name-regex(Gradients/.*AddmmBackward0.*)"],
        "iteration": "1|2", "saved_data": "statistic", "input_output": 2,
        "statistic_category": ["max", "nan count"]})
    with gd.Dump(config) as dump:
        train(dump)
    base = tmp_path / "dump" / "rank_0" / "Net" / "0"
    assert sorted(os.listdir(base)) == ["1", "2"]
    assert not glob.glob(f"{base}/*/*.npy")
    rows = (base / "1" / "statistic.csv").read_text().splitlines()
    assert rows[0].endswith("Shape,Max Value,NaN Count")
    kernels = {r.split(",")[0] for r in rows[1:]}
    # An op type matches as a case-insensitive substring: "relu" selects ReluBackward0 too.
    assert kernels == {"relu", "ReluBackward0", "AddmmBackward0", "Parameter"}, kernels
    assert all(r.split(",")[5] == "output" for r in rows[1:])


def test_overflow_mode_dumps_only_kernels_with_nan_or_inf(tmp_path):
    class Overflow(nn.Module):
        def forward(self, x):
            y = x * 2.0
            z = y * 1e38  # inf for |x| > 1.7
            return z - z

    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"op_debug_mode": 3})
    with gd.Dump(config) as dump:
        model = dump.wrap(torch.jit.script(Overflow()))
        model(torch.tensor([1.0, 3.0]))
    files = names(tmp_path / "dump" / "rank_0" / "Net" / "0" / "0")
    assert {f.split(".")[0] for f in files} == {"mul", "sub"}
    assert not any("mul-op0" in f for f in files)  # x * 2 is finite


def test_exception_mode_names_the_kernel_and_the_users_line(tmp_path):
    class Broken(nn.Module):
        def forward(self, x):
            h = torch.relu(x)
            return torch.matmul(h, torch.ones(5, 2))  # BROKEN LINE

    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"op_debug_mode": 4})
    line = next(i for i, text in enumerate(open(__file__), 1) if "# BROKEN LINE" in text)
    with gd.Dump(config) as dump:
        model = dump.wrap(torch.jit.script(Broken()))
        with pytest.raises(RuntimeError) as error:
            model(torch.randn(3, 4))
    message = str(error.value)
    assert "Default/matmul-op" in message and f"test_api.py:{line}" in message, message
    files = names(tmp_path / "dump" / "rank_0" / "Net" / "0" / "0")
    assert {f.split(".")[0] for f in files} == {"matmul"}
    assert len(glob.glob(str(tmp_path / "dump/rank_0/Net/0/0/matmul.*.input.*.npy"))) == 2


@pytest.mark.parametrize("eager", [False, True])
def test_sampling_and_bin_files(tmp_path, eager):
    config = write_config(tmp_path / "d.json", tmp_path / "dump",
                          e2e={"sample_mode": 1, "sample_num": 5})
    with gd.Dump(config) as dump:
        train(dump, steps=1, eager=eager)
    sampled = glob.glob(str(tmp_path / "dump/rank_0/Net/0/0/linear.*.output.0.*.npy"))
    assert sampled and all(np.load(f).shape == (5,) for f in sampled)

    config = write_config(tmp_path / "b.json", tmp_path / "bin", {"file_format": "bin"})
    with gd.Dump(config) as dump:
        train(dump, steps=1, eager=eager)
    frame = graphdump.load(tmp_path / "bin")
    row = frame[(frame.kernel.str.endswith("linear-op0")) & (frame.io == "output")].iloc[0]
    assert not row.file.endswith(".npy")  # an Ascend dump file holding the kernel's tensors
    assert graphdump.read(row).shape == (4, 8)


@pytest.mark.parametrize("eager", [False, True])
def test_ge_dialect(tmp_path, eager):
    config = tmp_path / "ge.json"
    config.write_text(json.dumps({"dump": {"enable_dump": True, "dump_path": str(tmp_path / "ge"),
                                           "dump_step": "0|1", "dump_mode": "output"}}))
    with gd.Dump(config, name="mynet") as dump:
        train(dump, steps=3, eager=eager)
    steps = glob.glob(str(tmp_path / "ge" / "*" / "0" / "mynet" / "0" / "*"))
    assert sorted(os.path.basename(s) for s in steps) == ["0", "1"]
    frame = graphdump.load(tmp_path / "ge")
    assert set(frame.io) == {"output"} and set(frame.iteration) == {0, 1}


def test_two_forward_calls_then_their_backward_passes(tmp_path):
    # Each backward pass finds the kernels of the call that made its graph, whichever ran last.
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    with gd.Dump(config) as dump:
        net = dump.wrap(torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.Tanh())))
        optimizer = dump.track(torch.optim.SGD(net.parameters(), lr=0.1))
        a = net(torch.randn(2, 4)).sum()
        b = net(torch.randn(2, 4)).sum()
        a.backward()
        b.backward()
        optimizer.step()
    files = os.listdir(tmp_path / "dump" / "rank_0" / "Net" / "0" / "0")
    tanh = [f for f in files if f.startswith("TanhBackward0.") and ".output.0." in f]
    assert len(tanh) == 2 and all("Gradients_Default_1-Tanh_" in f for f in tanh), tanh


def test_a_scheduler_made_before_track_keeps_counting_steps(tmp_path):
    # torch 2's LRScheduler marks the optimizer.step it wraps (_wrapped_by_lr_sched) and warns at
    # its first step() when the mark is gone; track() wraps that step once more and keeps it.
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gd.Dump(config) as dump:
            dump.wrap(net)
            dump.track(optimizer)
            for _ in range(2):
                net(torch.ones(2, 3)).sum().backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
    assert not [str(w.message) for w in caught if "optimizer.step()" in str(w.message)]
    assert optimizer.param_groups[0]["lr"] == 0.25 and dump.summary["optimizer_steps"] == 2
    assert global_order(tmp_path / "dump" / "rank_0") == [0, 1]
