"""Blow-ups, not only NaNs (docs/hunt.md, "Blow-ups"; docs/analysis.md, graphdump watch), on
lr_spike.py: a tiny attention classifier under autocast whose schedule multiplies AdamW's lr
by 1e4 at step 4 (loss ~1.4 -> ~1e4 from step 5, no NaN). Every number is checked with NumPy
against the dump's own files:

- the update kernels' graph-file entries carry the line of `optimizer.step()` and the group's
  hyperparameters by iteration (lr 0.01, then 100 at iteration 4, then 0.01), and load() gives
  them as columns at each row's iteration;
- watch --check weight-change judges the updates of a statistic dump from the L2 norms (the
  hits are exactly the updates whose |(||w|| - ||w_prev||)| / ||w_prev|| > 0.1: iteration 4's);
  loss-spike names iteration 5's loss; a check with nothing to judge (no L2 norm) says so and
  what it needs, with exit status 3, instead of an all-clear;
- hunt --checks large,weight-change,loss-spike names the optimizer step (iteration 4, the
  optimizer.step() line, lr 100, the update's size against iteration 3's), not the attention
  einsum of the next step.
"""
import csv
import glob
import json
import os
import re

import numpy as np
import pytest

import gdtest
from conftest import HERE, graphdump

SCRIPT = os.path.join(HERE, "lr_spike.py")
SPIKE, STEPS = 4, 7
LR = [1e-2 * (1e4 if step == SPIKE else 1.0) for step in range(STEPS)]


def _step_line():
    with open(SCRIPT, encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, 1) if "optimizer.step()  # the update" in line)


STEP_LINE = f"lr_spike.py:{_step_line()}"


def _dump(root, name, categories):
    config = gdtest.write_config(
        os.path.join(root, f"{name}.json"), os.path.join(root, name),
        {"saved_data": "statistic", "net_name": "Net", "statistic_category": categories})
    p = graphdump("python", "--config", config, SCRIPT, "--steps", STEPS, check=0)
    losses = [float(x) for x in re.findall(r"loss (\S+)", p.stdout)]
    return os.path.join(root, name), losses


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("blowup"))
    norms, losses = _dump(root, "norms", ["max", "min", "l2norm", "nan count"])
    bare, _ = _dump(root, "bare", ["max", "min"])
    hunt_root = os.path.join(root, "hunt")
    hunt = graphdump("hunt", "--checks", "large,weight-change,loss-spike", "--dump-path",
                     hunt_root, SCRIPT, "--steps", STEPS, timeout=600)
    return {"norms": norms, "bare": bare, "losses": losses, "hunt": hunt,
            "hunt_root": hunt_root}


def _rows(dump):
    """(iteration, row) of every statistic.csv row of rank 0."""
    out = []
    for path in glob.glob(os.path.join(dump, "rank_0", "Net", "0", "*", "statistic.csv")):
        iteration = int(os.path.basename(os.path.dirname(path)))
        with open(path, newline="", encoding="utf-8") as f:
            out += [(iteration, row) for row in csv.DictReader(f)]
    return out


def _norm_pairs(dump):
    """{(iteration, Op Name): (||w_prev||, ||w||)} from statistic.csv's L2 norms: each update
    kernel's input 0 against its output 0, and each Parameter row against its row of the
    iteration before."""
    updates, parameters = {}, {}
    for iteration, row in _rows(dump):
        norm = float(row["L2Norm Value"])
        if row["Op Name"].startswith("Default_optimizer-AdamW") and row["Slot"] == "0":
            updates.setdefault((iteration, row["Op Name"]), {})[row["IO"]] = norm
        elif row["Op Type"] == "Parameter":
            parameters[(iteration, row["Op Name"])] = norm
    pairs = {k: (v["input"], v["output"]) for k, v in updates.items()}
    for (iteration, name), norm in parameters.items():
        if (iteration - 1, name) in parameters:
            pairs[(iteration, name)] = (parameters[(iteration - 1, name)], norm)
    return pairs, len(updates)


def _ir_entries(text):
    """[(attributes line, full name, [(file, line, code) of each '# In file' line])]."""
    entries = []
    for block in text.split("\n  %")[1:]:
        lines = block.splitlines()
        name = re.search(r"# Fullname with scope: \((.*)\)", block).group(1)
        frames = [re.match(r"\s*# In file (.*)\((\d+)\)/(.*)/$", line).groups()
                  for line in lines if "# In file " in line]
        entries.append((lines[0], name, frames))
    return entries


def test_update_kernels_carry_their_line_and_hyperparameters(runs):
    (ir,) = glob.glob(os.path.join(runs["norms"], "rank_0", "graphs", "*.ir"))
    with open(ir, encoding="utf-8") as f:
        entries = [e for e in _ir_entries(f.read())
                   if e[1].startswith("Default/optimizer-AdamW/")]
    assert len(entries) == 4, "one update kernel per parameter (qkv and head, weight and bias)"
    for node, name, frames in entries:
        own = [(file, line, code) for file, line, code in frames if "/torch/" not in file]
        assert own, f"{name}: no frame of the script in {frames}"
        file, line, code = own[0]
        assert f"{os.path.basename(file)}:{line}" == STEP_LINE, f"{name}: the step's line"
        assert code.strip().startswith("optimizer.step()"), f"{name}: its code {code!r}"
        assert node.endswith("{optimizer: 0, param_group: 0}"), f"{name}: its attributes {node!r}"
        assert "lr" not in node, f"{name}: hyperparameters stay out of the graph files"
    # The group's hyperparameters, a line each time they changed: at the first step, at the
    # spike and after it.
    with open(os.path.join(os.path.dirname(ir), "hyperparameters.jsonl"), encoding="utf-8") as f:
        recorded = [json.loads(line) for line in f]
    assert [(r["iteration"], r["optimizer"], r["param_group"]) for r in recorded] == \
        [(0, 0, 0), (SPIKE, 0, 0), (SPIKE + 1, 0, 0)], recorded
    assert [r["lr"] for r in recorded] == [LR[0], LR[SPIKE], LR[SPIKE + 1]]
    for r in recorded:
        assert r["betas"] == [0.9, 0.99] and r["weight_decay"] == 0.01 and r["eps"] == 1e-8


def test_graph_files_are_not_rewritten_for_a_new_lr(runs):
    """The lr changes at the spike and after it: the graph files, written when the first steps
    found their kernels, are not written again for that (a schedule changing the lr at every
    step once rewrote them at every step, each update kernel's entry growing by a run a step)."""
    rank = os.path.join(runs["norms"], "rank_0")
    written = max(os.stat(p).st_mtime_ns for p in glob.glob(os.path.join(rank, "graphs", "*.ir")))
    spike = os.stat(os.path.join(rank, "Net", "0", str(SPIKE - 1), "statistic.csv")).st_mtime_ns
    assert written < spike, "the graph files were written again after the lr changed"


def test_load_gives_the_hyperparameters_per_row(runs):
    import graphdump
    table = graphdump.load(runs["norms"])
    update = table["kernel"].astype(str).str.startswith("Default/optimizer-AdamW")
    assert update.any()
    rows = table[update]
    np.testing.assert_array_equal(rows["lr"].to_numpy(), np.array(LR)[rows["iteration"]])
    assert set(rows["betas"]) == {(0.9, 0.99)}
    assert (rows["weight_decay"] == 0.01).all() and (rows["param_group"] == 0).all()
    assert rows["source"].astype(str).str.endswith(STEP_LINE).all(), set(rows["source"])
    others = table[~update]
    assert others["lr"].isna().all() and others["param_group"].isna().all()


def test_watch_weight_change_from_statistic_norms(runs):
    pairs, updates = _norm_pairs(runs["norms"])
    assert updates == 4 * STEPS, "an update kernel per parameter and step"
    expected = sorted(k for k, (a, b) in pairs.items() if abs(b - a) / a > 0.1)
    assert {it for it, name in expected if name.startswith("Default_optimizer")} == {SPIKE}, \
        f"the spike's updates: {expected}"
    assert {it for it, _ in expected} <= {SPIKE, SPIKE + 1}, f"and the weights after: {expected}"
    p = graphdump("watch", runs["norms"], "--check", "weight-change", "--json", "-q", check=1)
    hits = json.loads(p.stdout)["hits"]
    found = sorted((h["iteration"], re.sub(r"[/. ]", "_", h["kernel"])) for h in hits)
    assert found == expected
    first = hits[0]
    assert first["iteration"] == SPIKE and first["kernel"].startswith("Default/optimizer-AdamW/")
    for h in hits:
        before, after = pairs[(h["iteration"], re.sub(r"[/. ]", "_", h["kernel"]))]
        m = re.match(r"\|\|w\|\| (\S+) -> (\S+): \|\|w - w_prev\|\| / \|\|w_prev\|\| >= (\S+) ",
                     h["detail"])
        assert m, h["detail"]
        assert np.isclose(float(m.group(1)), before, rtol=1e-5)
        assert np.isclose(float(m.group(2)), after, rtol=1e-5)
        assert np.isclose(float(m.group(3)), abs(after - before) / before, rtol=1e-5)
        if h["kernel"].startswith("Default/optimizer-"):
            assert f"the update of iteration {SPIKE}" in h["detail"], h["detail"]
    text = graphdump("watch", runs["norms"], "--check", "weight-change", "-q", check=1)
    assert "judged nothing" not in text.stderr


def test_watch_loss_spike(runs):
    losses = runs["losses"]
    p = graphdump("watch", runs["norms"], "--check", "loss-spike", "--json", "-q", check=1)
    hits = json.loads(p.stdout)["hits"]
    assert [h["iteration"] for h in hits][0] == SPIKE + 1, hits
    first = hits[0]
    m = re.match(r"loss (\S+) is (\S+)x its usual (\S+)", first["detail"])
    assert m, first["detail"]
    assert np.isclose(float(m.group(1)), losses[SPIKE + 1], rtol=1e-3)
    usual = np.median(losses[:SPIKE + 1][-5:])
    assert np.isclose(float(m.group(3)), usual, rtol=1e-3), (m.group(3), usual)


def test_a_check_with_nothing_to_judge_says_so(runs):
    for check in ("weight-change", "grad-explode"):
        p = graphdump("watch", runs["bare"], "--check", check, "-q")
        assert p.returncode == 3, f"{check}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        assert f"{check}:" in p.stderr and "judged nothing" in p.stderr, p.stderr
        assert "l2norm" in p.stderr, "how to get data it can judge"
        j = graphdump("watch", runs["bare"], "--check", check, "--json", "-q")
        assert j.returncode == 3
        assert json.loads(j.stdout)["nothing_judged"], j.stdout
    judged = graphdump("watch", runs["norms"], "--check", "grad-explode", "-q")
    assert judged.returncode in (0, 1) and "judged nothing" not in judged.stderr, judged.stderr


def test_hunt_names_the_optimizer_step(runs):
    p = runs["hunt"]
    assert p.returncode == 1, f"{p.stdout}\n{p.stderr}"
    with open(os.path.join(runs["hunt_root"], "answer.json"), encoding="utf-8") as f:
        answer = json.load(f)
    assert answer["iteration"] == SPIKE, answer
    assert answer["check"].startswith("weight-change"), answer["check"]
    # The rerun's update has the same statistics as pass 1's (compared by values, not wording).
    assert answer["verdict"] == "persistent", (answer["verdict"], answer["verdict_detail"])
    assert answer["kernel"].startswith("Default/optimizer-AdamW/"), answer["kernel"]
    blowup = answer["blowup"]
    assert blowup["optimizer"] == "AdamW" and blowup["iteration"] == SPIKE
    assert blowup["step_line"].endswith(STEP_LINE), blowup["step_line"]
    assert blowup["lr"] == LR[SPIKE] and blowup["previous_lr"] == LR[SPIKE - 1]
    assert blowup["hyperparameters"]["betas"] == [0.9, 0.99]
    # The update's size, from the tensor dump's files of the kernel's input 0 and output 0.
    pass2 = answer["tensor_dump"]
    # Pass 2 numbers its kernels from its first dumped iteration: the name without -op{N}.
    name = re.sub(r"-op\d+$", "", re.sub(r"[/. ]", "_", blowup["kernel"]))

    def size(iteration):
        pattern = os.path.join(pass2, "rank_0", "*", "0", str(iteration), f"*.{name}-op*.npy")
        files = {re.search(r"\.(input|output)\.(\d+)\.[^.]*\.[^.]*\.npy$", f).groups(): f
                 for f in glob.glob(pattern)}
        a = np.load(files[("input", "0")]).astype(np.float64)
        b = np.load(files[("output", "0")]).astype(np.float64)
        return np.linalg.norm(b - a)

    assert np.isclose(blowup["update_norm"], size(SPIKE), rtol=1e-6)
    assert np.isclose(blowup["usual_update_norm"], size(SPIKE - 1), rtol=1e-6)
    assert blowup["update_ratio"] > 1000
    out = p.stdout
    assert f"AdamW step at iteration {SPIKE}" in out and STEP_LINE in out, out
    assert f"lr {LR[SPIKE]}" in out and "its usual size" in out, out
    assert "einsum" not in out.split("dumps:")[0], "not the next step's einsum"
    assert answer["caller_line"] is None, "the step's line is the user's own: no 'called from'"


def test_hunt_checks_take_watch_thresholds(tmp_path):
    for bad in ("large:x", "nan:3", "weight-change:-1", "zero"):
        p = graphdump("hunt", "--checks", bad, "--dump-path", tmp_path / "h", SCRIPT)
        assert p.returncode == 2, f"{bad}: {p.returncode}\n{p.stderr}"
        assert "is not a check hunt takes" in p.stderr and "loss-spike[:T]" in p.stderr
    assert not os.path.exists(tmp_path / "h" / "pass1"), "nothing run"
