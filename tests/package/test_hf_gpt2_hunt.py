"""graphdump hunt on a HuggingFace transformers model no one here wrote (docs/hunt.md):
hf_gpt2_nan.py trains a tiny GPT2LMHeadModel (random weights, no download) on precomputed
features that its data pipeline standardises per record; at step 3 row 1 of the batch is a
blank record, whose standard deviation is 0, so its features are 0/0 = NaN, fed to the model
as inputs_embeds. The hunt names iteration 3, the first kernel that holds the NaN (the
position-embedding add of GPT2Model.forward, its input 0: received from the batch), the
library's line (transformers/models/gpt2/modeling_gpt2.py) and the user's line that called the
model; the same script without the blank record is no hit (transformers' masks are not taken
for infinities)."""
import glob
import json
import os
import re

import numpy as np
import pytest

from conftest import HERE, graphdump
from hf_check import HF_ENV

SCRIPT = os.path.join(HERE, "hf_gpt2_nan.py")
BLANK_STEP, BLANK_ROW = 3, 1


def script_line(text):
    with open(SCRIPT, encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


def iterations_of(dump):
    return sorted({int(os.path.basename(d)) for d in
                   glob.glob(os.path.join(dump, "rank_0", "*", "0", "[0-9]*"))})


@pytest.fixture(scope="module")
def hunted(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_gpt2_hunt") / "hunt"
    p = graphdump("hunt", "--dump-path", root, SCRIPT, "--blank-step", BLANK_STEP,
                  "--blank-row", BLANK_ROW, env=HF_ENV, timeout=600)
    with open(root / "answer.json", encoding="utf-8") as f:
        answer = json.load(f)
    return {"run": p, "root": root, "answer": answer}


def test_exit_status_and_the_answer_in_words(hunted):
    p, answer = hunted["run"], hunted["answer"]
    assert p.returncode == 1, p.stdout + p.stderr
    out = p.stdout
    assert f"nan at iteration {BLANK_STEP} (rank 0, graph 0): persistent" in out, out
    assert re.search(r"^  kernel: Default/transformer-GPT2Model/add-op\d+ \(input 0\)$", out,
                     re.M), out
    # The library's line, as the installed transformers has it, then the user's call.
    library = re.search(r"^  line: (\S+/transformers/models/gpt2/modeling_gpt2\.py):(\d+): "
                        r"(.*)$", out, re.M)
    assert library, out
    with open(library.group(1), encoding="utf-8") as f:
        code = f.read().splitlines()[int(library.group(2)) - 1].strip()
    assert code == library.group(3) == answer["source_code"]
    assert code.startswith("hidden_states = inputs_embeds + position_embeds"), code
    call = script_line("out = model(inputs_embeds=features, labels=labels)")
    assert (f"  called from: {SCRIPT}:{call}: out = model(inputs_embeds=features, "
            "labels=labels)") in out, out
    assert (f"  first bad element: [{BLANK_ROW}, 0, 0], batch row {BLANK_ROW}") in out, out
    assert "origin: received" in out and "an input of the graph (the batch" in out, out


def test_answer_file(hunted):
    answer = hunted["answer"]
    assert (answer["status"], answer["verdict"], answer["origin"], answer["check"]) == \
        ("hit", "persistent", "received", "nan")
    assert (answer["iteration"], answer["rank"], answer["graph_id"], answer["call"]) == \
        (BLANK_STEP, 0, 0, 0)
    assert re.fullmatch(r"Default/transformer-GPT2Model/add-op\d+", answer["kernel"])
    assert re.fullmatch(r"Default/transformer-GPT2Model/add-op\d+", answer["statistics_kernel"])
    assert (answer["io"], answer["slot"]) == ("input", 0)
    assert answer["source_line"].endswith(
        os.path.join("transformers", "models", "gpt2", "modeling_gpt2.py") + ":" +
        answer["source_line"].rsplit(":", 1)[1])
    assert answer["caller_line"] == f"{SCRIPT}:{script_line('out = model(inputs_embeds=')}"
    assert answer["caller_code"].startswith("out = model(inputs_embeds=features")
    # One row (the blank record) of 4: its 8 x 32 features.
    assert answer["detail"] == (f"256 NaN of 1024 elements; first at [{BLANK_ROW}, 0, 0], "
                                f"row {BLANK_ROW} (1 of 4 rows)")
    assert (answer["first_index"], answer["row"]) == ([BLANK_ROW, 0, 0], BLANK_ROW)
    assert [step["how"] for step in answer["chain"]] == ["received from outside the dumped "
                                                         "kernels"]
    assert answer["chain"][0]["kernel"] == answer["kernel"]


def test_dumps_hold_the_bad_batch(hunted):
    answer, root = hunted["answer"], hunted["root"]
    assert iterations_of(answer["statistics_dump"]) == list(range(BLANK_STEP + 1))
    assert iterations_of(answer["tensor_dump"]) == [BLANK_STEP - 1, BLANK_STEP]
    name = answer["kernel"].replace("/", "_")
    inputs = glob.glob(os.path.join(answer["tensor_dump"], "rank_0", "*", "0", str(BLANK_STEP),
                                    f"add.{name}.*.input.0.*.npy"))
    assert len(inputs) == 1, inputs
    features = np.load(inputs[0])
    assert features.shape == (4, 8, 32) and features.dtype == np.float32
    assert np.isnan(features[BLANK_ROW]).all()
    others = np.delete(features, BLANK_ROW, axis=0)
    assert np.isfinite(others).all()
    # The pipeline's standardisation: each good record has mean 0 and standard deviation 1.
    np.testing.assert_allclose(others.reshape(3, -1).mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(others.reshape(3, -1).std(axis=1, ddof=1), 1, rtol=1e-5)
    # The step before is clean.
    before = glob.glob(os.path.join(answer["tensor_dump"], "rank_0", "*", "0",
                                    str(BLANK_STEP - 1), f"add.{name}.*.input.0.*.npy"))
    assert len(before) == 1 and np.isfinite(np.load(before[0])).all()
    with open(answer["report"], encoding="utf-8") as f:
        page = f.read()
    top = page.find('<section id="hunt-answer">')
    assert top > 0 and "called from: " in page[top:top + 4000]
    leftovers = [p for p in glob.glob(os.path.join(str(root), "**", "*"), recursive=True)
                 if ".tmp" in os.path.basename(p)]
    assert not leftovers


def test_the_clean_script_is_no_hit(tmp_path):
    p = graphdump("hunt", "--dump-path", tmp_path / "hunt", SCRIPT, "--steps", 3, env=HF_ENV,
                  timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(tmp_path / "hunt" / "answer.json", encoding="utf-8") as f:
        answer = json.load(f)
    assert answer["status"] == "no-hit", answer
    assert iterations_of(str(tmp_path / "hunt" / "pass1")) == [0, 1, 2]
