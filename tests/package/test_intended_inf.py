"""An attention mask's masked_fill(mask, -inf) writes -inf on purpose: watch lists it apart
instead of calling it a hit (docs/analysis.md, "What counts as a hit"); --count-intended-inf
counts it; a NaN (a row masked whole, then softmax) is always a hit."""
import json

import pytest

import graphdump
from conftest import graphdump as cli
from conftest import write_config

SCRIPT = """\
import sys
import torch


class Attention(torch.nn.Module):
    def forward(self, scores, mask):
        masked = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(masked, dim=-1)


net = torch.jit.script(Attention())
scores = torch.randn(4, 6)
mask = torch.zeros(4, 6, dtype=torch.bool)
mask[:, 4:] = True  # padding
if sys.argv[1] == "whole-row":
    mask[2] = True  # a row with nothing left: softmax makes NaN
net(scores, mask)
"""


def dump_runs(tmp, text, runs):
    """Dumps `text` as a script once per (name, argument) of `runs`; returns {name: dump}."""
    script = tmp / "attention.py"
    script.write_text(text)
    out = {}
    for name, argument in runs:
        config = write_config(tmp / f"{name}.json", tmp / name, {"net_name": "net"})
        cli("python", "--config", config, script, argument, check=0)
        out[name] = tmp / name
    return out


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return dump_runs(tmp_path_factory.mktemp("intended"), SCRIPT,
                     [("padding", "padding"), ("whole-row", "whole-row")])


def test_intended_infinities_are_not_hits(dumps):
    p = cli("watch", dumps["padding"], "--json")
    result = json.loads(p.stdout)
    assert p.returncode == 0 and result["hits"] == [], p.stdout
    intended = result["intended_infinities"]
    # The graph's constant -inf (the argument itself), masked_fill's output and the same
    # tensor as softmax's input.
    assert [(h["kernel"].rsplit("/", 1)[-1].split("-op")[0], h["io"]) for h in intended] == \
        [("masked_fill", "output"), ("softmax", "input"), ("data-1", "output")], intended
    assert intended[2]["iteration"] == -1 and "a constant of the graph" in intended[2]["detail"]
    assert intended[0]["detail"] == \
        "8 -Inf of 24 elements, written on purpose by masked_fill(value=-inf)"
    text = cli("watch", dumps["padding"], "--check", "nan,inf,overflow,large")
    assert text.returncode == 0, text.stdout
    assert "0 hit(s)" in text.stdout and "written on purpose by masked_fill(value=-inf)" in \
        text.stdout and "--count-intended-inf counts them" in text.stdout
    frame = graphdump.watch(dumps["padding"])
    assert frame.empty and len(frame.attrs["intended_infinities"]) == 3

    counted = cli("watch", dumps["padding"], "--count-intended-inf", "--json")
    hits = json.loads(counted.stdout)["hits"]
    assert counted.returncode == 1 and len(hits) == 3
    assert hits[0]["detail"].startswith("8 -Inf of 24 elements; first at [0, 4], row 0")
    assert len(graphdump.watch(dumps["padding"], count_intended_inf=True)) == 3


def test_nan_is_always_a_hit(dumps):
    p = cli("watch", dumps["whole-row"], "--json")
    result = json.loads(p.stdout)
    assert p.returncode == 1
    first = result["first_hit"]
    assert first["check"] == "nan" and "softmax" in first["kernel"] and first["io"] == "output"
    assert (first["row"], first["first_index"]) == (2, [2, 0])
    assert all(h["check"] == "nan" for h in result["hits"])


MASKED_ATTENTION = """\
import sys
import torch


class MaskedAttention(torch.nn.Module):
    \"\"\"Causal attention with padding, masks added to the scores (as most transformers do).\"\"\"

    def __init__(self, dim: int):
        super().__init__()
        self.q = torch.nn.Linear(dim, dim)
        self.k = torch.nn.Linear(dim, dim)
        self.v = torch.nn.Linear(dim, dim)
        self.scale = float(sys.argv[1])

    def forward(self, x, pad):
        length = x.size(1)
        scores = torch.matmul(self.q(x), self.k(x).transpose(1, 2)) * self.scale
        causal = torch.full((length, length), float("-inf")).triu(1)
        padding = torch.zeros(x.size(0), 1, length).masked_fill(pad.unsqueeze(1), float("-inf"))
        scores = scores + causal + padding
        return torch.matmul(torch.softmax(scores, dim=-1), self.v(x))


torch.manual_seed(0)
net = torch.jit.script(MaskedAttention(8))
x = torch.randn(3, 6, 8)
pad = torch.zeros(3, 6, dtype=torch.bool)
pad[1, 4:] = True  # sequence 1 is 4 long: its last two positions are padding
net(x, pad)
"""


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    return dump_runs(tmp_path_factory.mktemp("attention"), MASKED_ATTENTION,
                     [("masked", "0.35"), ("overflowing", "1e38")])


def short(kernel):
    return kernel.rsplit("/", 1)[-1].split("-op")[0]


def test_masked_attention_is_not_a_hit(attention):
    """The -inf a mask carries into the scores (triu of a full(-inf), the adds of the masks) is
    the mask's, not a hit; softmax makes no NaN since no row is masked whole."""
    for checks in ("nan,inf", "nan,inf,overflow,large"):
        p = cli("watch", attention["masked"], "--check", checks, "--json")
        result = json.loads(p.stdout)
        assert p.returncode == 0 and result["hits"] == [], p.stdout
    intended = {(short(h["kernel"]), h["io"]): h["detail"]
                for h in result["intended_infinities"] if h["iteration"] >= 0}
    assert intended[("full", "output")] == \
        "36 -Inf of 36 elements, written on purpose by full(fill_value=-inf)"
    assert intended[("triu", "output")] == \
        "15 -Inf of 36 elements, written on purpose by full(fill_value=-inf), carried through triu"
    assert intended[("masked_fill", "output")].startswith(
        "2 -Inf of 18 elements, written on purpose by masked_fill(value=-inf)")
    adds = sorted(h["detail"] for h in result["intended_infinities"]
                  if short(h["kernel"]) == "add" and h["io"] == "output")
    # scores + causal: 15 of each sequence's 36; + padding: the 3 of sequence 1's padded
    # columns that causal leaves ([4, 4], [5, 4], [5, 5]).
    assert adds == ["45 -Inf of 108 elements, written on purpose by full(fill_value=-inf), "
                    "carried through add",
                    "48 -Inf of 108 elements, written on purpose by full(fill_value=-inf), "
                    "carried through add"], adds
    assert ("softmax", "input") in intended and ("softmax", "output") not in intended
    counted = json.loads(cli("watch", attention["masked"], "--count-intended-inf",
                             "--json").stdout)["hits"]
    assert {short(h["kernel"]) for h in counted} >= {"full", "triu", "masked_fill", "add"}


def test_an_infinity_of_its_own_is_still_a_hit(attention):
    """Scores that overflow float32 hold infinities no mask wrote: the mul that made them is the
    first hit, and the adds that take them in are hits too, although a mask's -inf joins them."""
    p = cli("watch", attention["overflowing"], "--json")
    result = json.loads(p.stdout)
    assert p.returncode == 1, p.stdout
    assert short(result["first_hit"]["kernel"]) == "mul" and \
        result["first_hit"]["io"] == "output" and result["first_hit"]["check"] == "inf"
    hit = {(short(h["kernel"]), h["io"]) for h in result["hits"] if h["check"] == "inf"}
    assert ("add", "output") in hit and ("triu", "output") not in hit, hit
