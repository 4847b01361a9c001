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


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("intended")
    script = tmp / "attention.py"
    script.write_text(SCRIPT)
    out = {}
    for name in ("padding", "whole-row"):
        config = write_config(tmp / f"{name}.json", tmp / name, {"net_name": "net"})
        cli("python", "--config", config, script, name, check=0)
        out[name] = tmp / name
    return out


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
