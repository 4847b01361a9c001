"""`graphdump train` against torch.optim: after N steps on the same .pt, data and learning rate
the parameters are bit-identical (model without dropout), for SGD, momentum and Adam. With every
kernel dumped, backward (Gradients/...) and optimizer kernels appear in the dump and in the
execution order."""
import glob
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import gdmodels
import gdtest

STEPS = 3


def python_training(name, x, y, optimizer, lr):
    torch.set_num_threads(1)
    model = gdmodels.eager_with_weights(name)
    model.train()
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    elif optimizer == "momentum":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return model.state_dict()


@pytest.mark.parametrize("optimizer, lr, dump", [("sgd", 0.05, True), ("momentum", 0.05, False),
                                                ("adam", 0.01, False)])
def test_parameters_equal_torch_optim(optimizer, lr, dump):
    tmp = gdtest.temp_dir()
    try:
        torch.manual_seed(3)
        x = torch.randn(4, 3, 16, 16)
        y = torch.tensor([0, 3, 1, 4])
        np.save(os.path.join(tmp, "x.npy"), x.numpy())
        np.save(os.path.join(tmp, "y.npy"), y.numpy())
        args = ["train", gdmodels.model_path("small_cnn"), "--data", os.path.join(tmp, "x.npy"),
                "--labels", os.path.join(tmp, "y.npy"), "--steps", STEPS, "--optimizer",
                optimizer, "--lr", lr, "--save-model", os.path.join(tmp, "trained.pt")]
        if dump:
            args += ["--config", gdtest.write_config(os.path.join(tmp, "dump.json"),
                                                     os.path.join(tmp, "dump"))]
        _, out, _ = gdtest.run(*args, env=gdmodels.env_one_thread(), check=0)
        assert out.count("loss") == STEPS, f"{optimizer}: progress per step:\n{out}"
        ours = torch.jit.load(os.path.join(tmp, "trained.pt")).state_dict()
        expected = python_training("small_cnn", x, y, optimizer, lr)
        for key, value in expected.items():
            assert torch.equal(ours[key], value), (
                f"{optimizer}: parameter {key} differs from torch.optim "
                f"(max abs diff {(ours[key] - value).abs().max().item()})")
        if dump:
            check_dump(os.path.join(tmp, "dump", "rank_0"), x, y)
    finally:
        gdtest.cleanup(tmp)


def check_dump(root, x, y):
    order = open(os.path.join(root, "execution_order", "ms_execution_order_graph_0.csv")).read()
    lines = order.splitlines()
    assert lines[0] == "NodeExecutionOrder-FullNameWithScope", "execution order header"
    backward = [n for n in lines if n.startswith("Gradients/")]
    update = [n for n in lines if "/optimizer-" in n]
    assert any("ConvolutionBackward" in n for n in backward), (
        f"a convolution backward kernel in the execution order: {backward}")
    assert any(n.startswith("Gradients/Default/conv1-Conv2d/") for n in backward), (
        f"backward kernels carry the forward scope: {backward}")
    assert len(update) == 8, "one optimizer kernel per parameter"
    first_backward = lines.index(backward[0])
    assert all(lines.index(u) > first_backward for u in update), (
        "optimizer kernels come after backward kernels")
    assert all("-op" in n for n in lines[1:]), "every kernel has an -op suffix"
    assert len(set(lines[1:])) == len(lines) - 1, "kernel names are unique"
    glob_order = open(os.path.join(root, "execution_order",
                                   "ms_global_execution_order_graph_0.csv")).read().split()
    assert glob_order == [str(i) for i in range(STEPS)], "global execution order"
    for it in range(STEPS):
        step = os.path.join(root, "Net", "0", str(it))
        assert glob.glob(os.path.join(step, "ConvolutionBackward0.Gradients_*.output.*.npy")), (
            f"iteration {it}: backward outputs dumped")
        assert glob.glob(os.path.join(step, "ApplyGradientDescent.*.npy")), (
            f"iteration {it}: optimizer update dumped")
        assert glob.glob(os.path.join(step, "Parameter.conv1_weight.*.npy")), (
            f"iteration {it}: parameters dumped")
    # Parameter files of iteration 1 hold the weights after one SGD step.
    p1 = glob.glob(os.path.join(root, "Net", "0", "1", "Parameter.fc_0_weight.*.npy"))
    upd = glob.glob(os.path.join(root, "Net", "0", "0",
                                 "ApplyGradientDescent.Default_optimizer-SGD_fc_0_weight_*.output.0.*.npy"))
    assert len(p1) == 1 and len(upd) == 1 and np.array_equal(np.load(p1[0]), np.load(upd[0])), (
        "the update kernel's output of iteration 0 is the parameter of iteration 1")



if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
