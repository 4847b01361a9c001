"""compare on precision runs (docs/precision.md): each model of precision_models.py run in
float32 and with --precision bf16; compare (bf16 under test, float32 the reference) names the
kernel that adds the error at its source line (sum_net: the bfloat16 index_add; naive_var: the
subtraction that cancels), as the first divergence and the top contributor, not its inputs,
parameters or the kernels around it; --out, --json and the text agree, and the CSV's
attribution columns follow from its own metrics and from NumPy on the dumped files."""
import csv
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import gdtest as t
import precision_fixture as p

CASES = (("sum_net", ["sum_x.npy"], "index_add", "SUM_LINE", "inaccurate"),
         ("naive_var", ["var_x.npy"], "sub", "VAR_LINE", "ill-conditioned"))
BF16_RTOL = 2.0 ** -8
BF16_SMALL = 2.0 ** -8


def number(text):
    return float("nan") if text == "" else float(text)


def norm_rel_err(path_a, path_b, small):
    a = np.load(path_a).astype(np.float64).ravel()
    b = np.load(path_b).astype(np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), small * math.sqrt(b.size)))


@pytest.fixture(scope="module")
def runs(module_scratch):
    """{model: (its float32 dump, its bfloat16 dump)}."""
    out = {}
    for model, inputs, _, _, _ in CASES:
        fp32, _, _ = p.dump_run(module_scratch, model + "_fp32", model, inputs)
        bf16, _, _ = p.dump_run(module_scratch, model + "_bf16", model, inputs,
                                "--precision", "bf16")
        out[model] = (fp32, bf16)
    return out


@pytest.mark.parametrize("model, inputs, op, marker, replay_verdict", CASES)
def test_compare_names_the_kernel_adding_error(module_scratch, runs, model, inputs, op, marker,
                                               replay_verdict):
    fp32, bf16 = runs[model]
    names = p.kernel_names(fp32)
    target = p.find(names, op)
    where = f"precision_models.py:{p.source_line(marker)}"

    out_csv = os.path.join(module_scratch, model + ".csv")
    code, out, err = t.run("compare", bf16, fp32, "-q", "--out", out_csv)
    assert code == 1, f"{model}: a kernel adds error: {out}{err}"
    assert (f"first divergence: {target} " in out and
            where in out.split("first divergence:")[1].splitlines()[0]), (
        f"{model}: the text names {target} at {where}: {out}")
    ranked = out.split("kernels adding error")[1].splitlines()[1]
    assert ranked.strip().startswith("1.") and target in ranked and where in ranked, (
        f"{model}: the ranked list starts with {target} at {where}: {ranked}")
    assert "sources that differ" not in out, (
        f"{model}: the bfloat16 casts of parameters and inputs are within the bfloat16 "
        f"standard, so no source is listed: {out}")

    code, out, err = t.run("compare", bf16, fp32, "-q", "--json")
    j = json.loads(out)
    first = j["first_adding_error"]
    assert first["kernel"] == target, f"{model}: the first kernel adding error"
    assert first["source_line"].endswith(where), (
        f"{model}: its user source line is {where}: {first['source_line']}")
    assert j["first_failure"]["kernel"] == target, (
        f"{model}: the first kernel with verdict error is the same kernel")
    assert j["contributors"][0]["kernel"] == target, f"{model}: the top contributor"
    assert j["contributors"][0]["contribution_rank"] == 1, f"{model}: ranked first"
    assert [c["kernel"] for c in j["contributors"]] == [target], (
        f"{model}: no other kernel adds error")
    assert j["differing_sources"] == [], f"{model}: no parameter differs beyond bfloat16"
    assert j["differing_graph_inputs"] == [], f"{model}: nor does the graph input"
    kernels = {k["kernel_a"]: k for k in j["kernels"]}
    for k in j["kernels"]:
        if k["role"] != "operator":
            assert not k["adds_error"] and k["contribution_rank"] == 0, (
                f"{model}: {k['kernel_a']} ({k['role']}) is never named")
    assert any(k["role"] == "parameter" for k in j["kernels"]), (
        f"{model}: the parameters were compared (role parameter)")
    i = names.index(target)
    assert i > 0 and i + 1 < len(names), f"{model}: {target} has neighbours: {names}"
    for neighbour in (names[i - 1], names[i + 1]):
        k = kernels[neighbour]
        assert not k["adds_error"] and k["verdict"] != "error", (
            f"{model}: neighbour {neighbour} does not add error: {k['verdict']} "
            f"{k['reason']} growth {k['growth']}")
    after = kernels[names[i + 1]]
    assert after["verdict"] == "warning" and "inherits error" in after["reason"], (
        f"{model}: the next kernel inherits the error: {after['reason']}")
    k = kernels[target]
    assert k["verdict"] == "error" and k["reason"].startswith("adds error"), (
        f"{model}: {target}: {k['reason']}")
    assert k["growth"] >= 10, f"{model}: {target} grows the error >= 10x: {k['growth']}"
    for tensor in k["tensors"]:
        if tensor["dtype_b"] == "int64":  # sum_net's index_add reads its index: compared exactly
            assert (tensor["dtype_a"], tensor["standard"]) == ("int64", "exact"), (
                f"{model}: an int64 input is judged exactly: {tensor}")
            continue
        assert tensor["standard"] == "bfloat16", (
            f"{model}: bfloat16 vs float32 is judged by bfloat16")
        assert (tensor["dtype_a"], tensor["dtype_b"]) == ("bfloat16", "float32"), (
            f"{model}: the file names' dtypes")
    assert sum(t["standard"] == "bfloat16" for t in k["tensors"]) >= 2, (
        f"{model}: {target}'s floating tensors are compared: {k['tensors']}")

    # With --atol 1e-2 --rtol 1e-2 the elementwise rule changes ("user"), the
    # attribution does not: the same kernel adds the error.
    code, out, err = t.run("compare", bf16, fp32, "-q", "--json", "--atol", "1e-2",
                           "--rtol", "1e-2")
    loose = json.loads(out)
    assert loose["first_adding_error"]["kernel"] == target, (
        f"{model}: --atol/--rtol 1e-2 names the same kernel")
    assert {tt["standard"] for k in loose["kernels"] for tt in k["tensors"]} == {"user"}, (
        f"{model}: --atol/--rtol judge every tensor")

    # The CSV: columns, and attribution that follows from the metrics and from NumPy.
    with open(out_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    for column in ("standard", "norm_rel_err", "error", "role", "input_error",
                   "output_error", "growth", "added_error", "adds_error",
                   "contribution_rank"):
        assert column in rows[0], f"{model}: --out has a {column} column"
    flagged = {r["kernel_a"] for r in rows if r["adds_error"] == "true"}
    assert flagged == {target}, f"{model}: adds_error in the CSV"
    for r in rows:
        if r["mode"] != "tensor":
            continue
        expected = norm_rel_err(r["path_a"], r["path_b"], BF16_SMALL)
        assert abs(number(r["norm_rel_err"]) - expected) <= 1e-9 + 1e-6 * expected, (
            f"{model}: norm_rel_err of {r['path_a']}: {r['norm_rel_err']} vs NumPy "
            f"{expected}")
    rows_of = [r for r in rows if r["kernel_a"] == target]
    inputs_err = max(number(r["error"]) for r in rows_of if r["io"] == "input")
    output_err = max(number(r["error"]) for r in rows_of if r["io"] == "output")
    r0 = rows_of[0]
    assert (r0["verdict"] if r0["io"] == "output" else rows_of[-1]["verdict"]) == ("error"), (
        f"{model}: the output fails the bfloat16 standard")
    assert (abs(number(r0["input_error"]) - inputs_err) <= 1e-9 * max(1, inputs_err) and
            abs(number(r0["output_error"]) - output_err) <= 1e-9 * max(1, output_err)), (
        f"{model}: input/output_error are the largest tensor errors")
    growth = output_err / max(inputs_err, BF16_RTOL)
    assert abs(number(r0["growth"]) - growth) <= 1e-6 * growth, (
        f"{model}: growth {r0['growth']} = {output_err} / max({inputs_err}, 2^-8)")
    assert r0["contribution_rank"] == "1", f"{model}: contribution_rank"
    # The error the kernel adds is far beyond what bfloat16 rounding explains.
    assert output_err > 0.05 and inputs_err < 0.01, (
        f"{model}: inputs {inputs_err}, output {output_err}")

    # --replay 1 replays the top contributor: the sum computes inaccurately in bfloat16, the
    # subtraction is ill-conditioned (docs/precision.md, "Replay").
    code, out, err = t.run("compare", bf16, fp32, "-q", "--replay", "1", "--json")
    assert code == 1, f"{model}: compare --replay exits as compare does: {err}"
    replays = json.loads(out)["replays"]
    assert [(r["kernel"], r["contributor"]) for r in replays] == [(target, 1)], (
        f"{model}: --replay 1 replays the top contributor")
    assert replays[0]["replay"]["verdict"] == replay_verdict, (
        f"{model}: the replay's verdict: {replays[0]['replay'].get('reason')}")
    assert replays[0]["replay"]["reproduces"], (
        f"{model}: the replay reproduces the dumped output bit for bit")
    assert f"replaying 1/1: {target}" in err, f"{model}: progress on stderr: {err}"
    code, out, err = t.run("compare", bf16, fp32, "-q", "--replay", "3")
    section = out.split("replays of the kernels adding the most error")
    assert (len(section) == 2 and
            f"1. {target}: {replay_verdict}" in section[1].splitlines()[1] and
            f"{replay_verdict}: {replay_verdict}" not in out), (
        f"{model}: the text lists the replay's verdict and words: {out}")

    # report --compare --replay 1: the attribution chart marks the kernel with its verdict,
    # and the table of kernels adding error holds the replay's words.
    html_path = os.path.join(module_scratch, model + ".html")
    code, out, err = t.run("report", "--compare", bf16, fp32, "--replay", "1", "-o",
                           html_path)
    assert code == 0, f"{model}: report --replay: {out}{err}"
    with open(html_path) as f:
        html = f.read()
    data = json.loads(html.split('<script type="application/json" id="report-data">')[1]
                      .split("</script>")[0])
    charts = {c["id"]: c for c in data["charts"]}
    chart = charts.get("compare-attribution")
    assert chart is not None, f"{model}: the attribution chart: {sorted(charts)}"
    names_drawn = [pt["name"] for pt in chart["points"]]
    marks = [m for m in chart["markers"] if m["class"] == "adds-error"]
    assert [names_drawn[m["index"]] for m in marks] == [target], (
        f"{model}: the kernel adding error is marked")
    assert (marks and marks[0]["label"].startswith("#1 adds error x") and
            marks[0]["label"].endswith(f"(replay: {replay_verdict})")), (
        f"{model}: the marker's label: {marks}")
    series = {s_["name"]: s_["values"] for s_ in chart["series"]}
    at = names_drawn.index(target)
    assert series["outputs' norm rel err"][at] > 10 * series["inputs' norm rel err"][at], (
        f"{model}: outputs' error over inputs' at {target}: {series}")
    row = html.split('<details id="adding-error-table" open>')[1].split("</details>")[0]
    assert (f'data-kernel="{target}"' in row and
            f'<td class="replay-verdict"><b>{replay_verdict}</b>' in row and
            "its own error" in row), (
        f"{model}: the table row of {target} holds the replay's verdict: {row[:2000]}")


def test_a_replay_that_dies_is_reported(module_scratch, runs):
    fp32, bf16 = runs["naive_var"]
    # A replay that dies is reported with its signal, and compare goes on: graphdump beside a
    # graphdump-torch that kills itself.
    fake = os.path.join(module_scratch, "fake_bin")
    os.makedirs(fake)
    shutil.copy(t.BIN, os.path.join(fake, "graphdump"))
    with open(os.path.join(fake, "graphdump-torch"), "w") as f:
        f.write("#!/bin/sh\nkill -SEGV $$\n")
    os.chmod(os.path.join(fake, "graphdump-torch"), 0o755)
    p_ = subprocess.run([os.path.join(fake, "graphdump"), "compare", bf16, fp32, "-q",
                         "--replay", "1"], capture_output=True, text=True)
    assert (p_.returncode == 1 and "not replayable: graphdump replay was killed by signal 11"
            in p_.stdout), (
        f"a replay that crashes: {p_.returncode} {p_.stdout} {p_.stderr}")


def test_replay_needs_a_reference(module_scratch, runs):
    fp32, bf16 = runs["naive_var"]
    # --replay needs a reference: with --ranks, or a report of one dump, it is a usage error.
    code, out, err = t.run("compare", bf16, "--ranks", "--replay", "1")
    assert code == 2 and "--replay 1: replays need a reference dump B" in err, (
        f"compare --ranks --replay: {code} {err}")
    code, out, err = t.run("report", bf16, "--replay", "2", "-o",
                           os.path.join(module_scratch, "r.html"))
    assert (code == 2 and "replays need --compare A B" in err and
            not os.path.exists(os.path.join(module_scratch, "r.html"))), (
        f"report DIR --replay: {code} {err}")
    code, out, err = t.run("compare", bf16, fp32, "--replay", "-1")
    assert code == 2 and "expected a number of kernels from 0 to 1000" in err, (
        f"compare --replay -1: {code} {err}")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
