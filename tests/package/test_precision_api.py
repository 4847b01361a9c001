"""graphdump.compare and graphdump.replay tell the CLI's story (docs/precision.md, "Verdicts"):
on the positional encoding of tests/e2e/precision_models.py in bfloat16 against float32, the
first divergence is sin with the chain and the rounded parameter freqs to keep in float32, and
the replay of sin is ill-conditioned with the same chain."""
import json

import pytest

import precision_fixture as p  # tests/e2e (conftest puts it on the path)
from conftest import graphdump, write_config


def test_python_compare_and_replay_agree_with_the_cli(tmp_path):
    gd = pytest.importorskip("graphdump")
    runs = {}
    for name, extra in (("fp32", []), ("bf16", ["--precision", "bf16"])):
        config = write_config(tmp_path / f"{name}.json", tmp_path / name, {"net_name": "Net"})
        graphdump("run", p.model("pos_enc"), "--input", p.data("pos_x.npy"), "--config", config,
                  *extra, check=0)
        runs[name] = tmp_path / name
    cli = json.loads(graphdump("compare", runs["bf16"], runs["fp32"], "-q", "--json").stdout)
    first = gd.compare(runs["bf16"], runs["fp32"]).first_divergence
    assert first["kernel"] == cli["first_adding_error"]["kernel"]
    assert first["kernel"].rsplit("/", 1)[-1].startswith("sin-op"), first["kernel"]
    assert first["inputs_near_rounding"] and first["adds_error"], first
    chain = first["float32_chain"]
    assert chain == cli["first_adding_error"]["float32_chain"]
    assert [q["parameter"] for q in chain["parameters"]] == ["freqs"], chain
    assert chain["keep_fp32"][-1] == "freqs" and chain["keep_fp32"][-2] == first["kernel"]
    replayed = gd.replay(runs["bf16"], first["kernel"], reference=runs["fp32"])
    assert replayed["verdict"] == "ill-conditioned", replayed["reason"]
    assert replayed["float32_chain"]["keep_fp32"] == chain["keep_fp32"]
