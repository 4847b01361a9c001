"""Iterations follow training steps (docs/python.md, "Iterations"), and a dump that starts at a
later iteration is ordered as a plain run's:

- two optimizers (one per part of the model) stepping in each of 3 training steps: 3
  iterations, not 6; a third optimizer over a frozen part (no gradients) steps too and ends
  nothing; every step's update kernels of both are in that step's iteration;
- an optimizer per parameter stepping in post-accumulate-grad hooks (optimizer in backward, as
  in PyTorch's tutorial): 5 training steps of a 4-parameter model are 5 iterations, not 20, each
  with the 4 updates, named as in a dump of one later iteration only; `graphdump python
  --precision bf16 --steps 2` of such a script stops at the end of its second training step's
  backward pass, not inside the first at its second parameter's step;
- a dump of iterations 1 and 2 only (what hunt's pass 2 does): the execution order is
  forward-first, as a dump of every iteration: the backward's and the optimizer's kernels of the
  iterations that dump nothing are not registered before the forward's;
- a dump of iteration 2 only names every kernel of that iteration, its backward's included, as a
  dump of every iteration does, with the same statistics (the backward graphs of the steps that
  dump nothing are not walked);
- a deeper model (blocks in a ModuleList, attention and MLP inside) dumped in iterations 1 and 3
  only: the module calls nested in the steps that dump nothing are not entered (docs/python.md,
  "Iterations"), yet iterations 1 and 3 name every kernel down to the innermost module as a dump
  of every iteration does, and the execution order, the calls and the iterations still count
  every step; a module whose own call runs a training step and then starts the next one (its
  backward pass opens the dumped iteration inside the call) has the modules it calls after that
  named in full.
"""
import csv
import os

import numpy as np
import torch
from torch import nn

import graphdump.torch as gd
from conftest import execution_order, global_order, graphdump, write_config


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.head = nn.Linear(8, 2)
        self.frozen = nn.Linear(2, 2)
        for p in self.frozen.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def _train(dump, steps=3, split=True):
    """Trains Net; `split`: three optimizers (body, head, the frozen part), else one."""
    torch.manual_seed(0)
    net = Net()
    optimizers = ([torch.optim.SGD(net.body.parameters(), lr=0.1),
                   torch.optim.Adam(net.head.parameters(), lr=0.01),
                   torch.optim.SGD(net.frozen.parameters(), lr=0.1)] if split else
                  [torch.optim.SGD(net.parameters(), lr=0.1)])
    for o in optimizers:
        dump.track(o)
    model = dump.wrap(net)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 2, generator=g)
        for o in optimizers:
            o.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        for o in optimizers:
            o.step()


def _iterations(rank):
    return sorted(int(n) for n in os.listdir(rank / "Net" / "0") if n.isdigit())


def test_two_optimizers_one_iteration_per_step(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "statistic"})
    with gd.Dump(config) as dump:
        _train(dump)
    rank = tmp_path / "dump" / "rank_0"
    assert _iterations(rank) == [0, 1, 2], "one iteration per training step"
    for it in (0, 1, 2):
        with open(rank / "Net" / "0" / str(it) / "statistic.csv", encoding="utf-8") as f:
            rows = f.read()
        assert "optimizer-SGD" in rows and "optimizer-Adam" in rows, \
            f"both optimizers' updates in iteration {it}"
        assert "optimizer-SGD_frozen" not in rows, "the frozen part's optimizer dumps nothing"


def test_later_iterations_are_ordered_forward_first(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"iteration": "1|2"})
    with gd.Dump(config) as dump:
        _train(dump, split=False)
    rank = tmp_path / "dump" / "rank_0"
    assert _iterations(rank) == [1, 2]
    order = execution_order(rank)
    first_backward = next(i for i, k in enumerate(order) if k.startswith("Gradients/"))
    first_update = next(i for i, k in enumerate(order) if "/optimizer-" in k)
    assert order[0].startswith("Default/body-Linear/"), f"forward first: {order[:3]}"
    forward = [i for i, k in enumerate(order)
               if not k.startswith("Gradients/") and "/optimizer-" not in k]
    assert max(forward) < first_backward < first_update, order


def _train_in_backward(dump, steps=5):
    """Trains Net's body and head with one Adam per parameter, stepped by each parameter's
    post-accumulate-grad hook; returns the parameters after training."""
    torch.manual_seed(0)
    net = Net()
    params = list(net.body.parameters()) + list(net.head.parameters())
    optimizers = {p: torch.optim.Adam([p], lr=0.01) for p in params}

    def hook(p):
        optimizers[p].step()
        optimizers[p].zero_grad()
    for p in params:
        dump.track(optimizers[p])
        p.register_post_accumulate_grad_hook(hook)
    model = dump.wrap(net)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 2, generator=g)
        ((model(x) - y) ** 2).mean().backward()
    return [p.detach().clone() for p in params]


def _updates(rank, it):
    with open(rank / "Net" / "0" / str(it) / "statistic.csv", encoding="utf-8") as f:
        return sorted({line.split(",")[1] for line in f if line.startswith("Adam,")})


def test_optimizers_in_backward_one_iteration_per_step(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "statistic"})
    with gd.Dump(config) as dump:
        trained = _train_in_backward(dump)
    rank = tmp_path / "dump" / "rank_0"
    assert _iterations(rank) == [0, 1, 2, 3, 4], "one iteration per training step"
    names = _updates(rank, 0)
    assert len(names) == 4, names
    assert all(_updates(rank, it) == names for it in range(5)), "every update in its step"
    # A dump of iteration 3 alone names the updates as the dump of every iteration does, and
    # the training is the same.
    config = write_config(tmp_path / "e.json", tmp_path / "late", {"saved_data": "statistic",
                                                                    "iteration": "3"})
    with gd.Dump(config) as dump:
        late = _train_in_backward(dump)
    assert _iterations(tmp_path / "late" / "rank_0") == [3]
    assert _updates(tmp_path / "late" / "rank_0", 3) == names
    for a, b in zip(trained, late):
        assert np.array_equal(a.numpy(), b.numpy())


IN_BACKWARD = """
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
optimizers = {p: torch.optim.Adam([p], lr=0.01) for p in model.parameters()}
def hook(p):
    optimizers[p].step()
    optimizers[p].zero_grad()
for p in model.parameters():
    p.register_post_accumulate_grad_hook(hook)
x, y = torch.randn(4, 6), torch.randn(4, 2)
for step in range(5):
    loss = ((model(x) - y) ** 2).mean()
    print("forward", step, flush=True)
    loss.backward()  # the training step: its optimizers step in here
    print("step", step, flush=True)
"""


def test_precision_steps_count_training_steps_with_optimizers_in_backward(tmp_path):
    script = tmp_path / "in_backward.py"
    script.write_text(IN_BACKWARD)
    run = graphdump("python", "--precision", "bf16", "--steps", "2", "--", script, check=0)
    # The second training step ends with its backward pass, where the script stops (as it
    # stops at the second optimizer.step() of a script that steps after backward).
    assert run.stdout.split() == ["forward", "0", "step", "0", "forward", "1"], (
        run.stdout + run.stderr)


def _rows(rank, iteration):
    """(op name, IO, slot, max, min) of each statistic row of `iteration`."""
    with open(rank / "Net" / "0" / str(iteration) / "statistic.csv", encoding="utf-8") as f:
        return [(r["Op Name"], r["IO"], r["Slot"], r["Max Value"], r["Min Value"])
                for r in csv.DictReader(f)]


def test_one_later_iteration_is_named_as_in_a_dump_of_all(tmp_path):
    ranks = {}
    for name, iteration in (("all", "all"), ("one", "2")):
        config = write_config(tmp_path / f"{name}.json", tmp_path / name,
                              {"saved_data": "statistic", "iteration": iteration})
        with gd.Dump(config) as dump:
            _train(dump, split=False)
        ranks[name] = tmp_path / name / "rank_0"
    assert _iterations(ranks["one"]) == [2]
    alone, among_all = _rows(ranks["one"], 2), _rows(ranks["all"], 2)
    assert any(r[0].startswith("Gradients_") for r in alone), alone
    assert alone == among_all


class Attention(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))

    def forward(self, x):
        weights = torch.softmax(self.q(x) @ self.k(x).transpose(-2, -1), dim=-1)
        return weights @ self.v(x)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = Attention(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


class Deep(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(2))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _train_deep(dump, steps=4):
    torch.manual_seed(0)
    model = dump.wrap(Deep())
    optimizer = dump.track(torch.optim.AdamW(model.parameters(), lr=1e-2))
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(2, 3, 8, generator=g), torch.randn(2, 3, 1, generator=g)
        optimizer.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def test_steps_that_dump_nothing_keep_the_names_of_nested_modules(tmp_path):
    ranks, trained, calls = {}, {}, {}
    for name, iteration in (("all", "all"), ("some", "1|3")):
        config = write_config(tmp_path / f"{name}.json", tmp_path / name,
                              {"saved_data": "statistic", "iteration": iteration})
        with gd.Dump(config) as dump:
            trained[name] = _train_deep(dump)
        calls[name] = dump.summary["calls"]
        ranks[name] = tmp_path / name / "rank_0"
    assert _iterations(ranks["some"]) == [1, 3]
    for it in (1, 3):
        alone, among_all = _rows(ranks["some"], it), _rows(ranks["all"], it)
        assert alone == among_all, f"iteration {it}"
    names = {r[0] for r in _rows(ranks["some"], 3)}
    innermost = "Default_blocks-ModuleList_1-Block_attn-Attention_q-Linear_linear-op"
    assert any(n.startswith(innermost) for n in names), sorted(names)[:10]
    assert any("mlp-Sequential_1-GELU_gelu-op" in n for n in names), sorted(names)[:10]
    assert global_order(ranks["some"]) == [0, 1, 2, 3], "every step of the graph is in the order"
    assert calls == {"all": 4, "some": 4}
    for a, b in zip(trained["all"], trained["some"]):
        assert torch.equal(a, b)


class Stepper(nn.Module):
    """A module whose call trains one step and then begins the next: its second backward pass
    opens an iteration inside the call, and its last call of `net` runs in that iteration."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def forward(self, x):
        self.net(x).sum().backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.net(x).sum().backward()  # no module's forward ran in the new iteration yet
        return self.net(x)


def test_modules_called_after_an_iteration_opens_inside_a_call_are_named(tmp_path):
    config = write_config(tmp_path / "d.json", tmp_path / "dump",
                          {"saved_data": "statistic", "iteration": "1"})
    torch.manual_seed(0)
    with gd.Dump(config) as dump:
        stepper = dump.wrap(Stepper())
        dump.track(stepper.optimizer)
        stepper(torch.ones(2, 4))
    rank = tmp_path / "dump" / "rank_0"
    assert _iterations(rank) == [1]
    names = {r[0] for r in _rows(rank, 1)}
    assert any(n.startswith("Default_net-Sequential_0-Linear_linear-op") for n in names), names
