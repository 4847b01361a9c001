"""One verdict for compare, replay, report and bisect (docs/precision.md, "Verdicts") on
pos_enc of precision_models.py: positions from a cumsum times a learned `freqs`, into sin, in
bfloat16 against float32. sin's inputs differ from the reference by no more than a few times
their own rounding while its output is far off: compare, replay and report call it
ill-conditioned (compare: adds error, inputs near their rounding) and name the chain to keep in
float32 (cumsum, unsqueeze, mul, sin at their lines) and the rounded parameter freqs with its
consumer, although freqs passes the bfloat16 standard. The kernels before sin are accurate.
bisect at the default tolerance keeps freqs with the chain; its command and the chain compare
prints bring the error under the tolerance (NumPy). --keep-fp32 keeps a parameter (its dump is
float32) and names parameters in its usage error."""
import json
import os
import shlex
import sys

import numpy as np
import pytest
import torch

import gdtest as t
import precision_fixture as p

TOLERANCE = 0.01
ROUNDING_MULTIPLE = 4  # kRoundingMultiple (precision_verdict.h)


def op_of(name):
    return name.rsplit("/", 1)[-1].rsplit("-op", 1)[0]


def run_output(work, name, *extra):
    out = os.path.join(work, name + ".npy")
    t.run("run", p.model("pos_enc"), "--input", p.data("pos_x.npy"), *extra, "--save-output", out,
          env=p.ONE_THREAD, check=0)
    return np.load(out)


@pytest.fixture(scope="module")
def runs(module_scratch):
    """The float32 and bfloat16 dumps of pos_enc, their kernel names and the source lines."""
    fp32, _, _ = p.dump_run(module_scratch, "fp32", "pos_enc", ["pos_x.npy"])
    bf16, _, _ = p.dump_run(module_scratch, "bf16", "pos_enc", ["pos_x.npy"], "--precision", "bf16")
    names = p.kernel_names(fp32)
    sin, mul, cumsum = p.find(names, "sin"), p.find(names, "mul"), p.find(names, "cumsum")
    line = {m: f"precision_models.py:{p.source_line(m)}"
            for m in ("POS_LINE", "ANGLE_LINE", "SIN_LINE")}
    return dict(fp32=fp32, bf16=bf16, names=names, sin=sin, mul=mul, cumsum=cumsum, line=line)


@pytest.fixture(scope="module")
def compared(runs):
    """compare --json of the two dumps: (exit status, stderr, the JSON)."""
    fp32, bf16 = runs["fp32"], runs["bf16"]
    # compare: sin adds error while its inputs carry only their rounding; the chain and freqs.
    code, out, err = t.run("compare", bf16, fp32, "-q", "--json")
    return code, err, json.loads(out)


def chain_of(compared):
    return compared[2]["first_adding_error"]["float32_chain"]


def mul_error(runs):
    """(bf16 output of mul, its float32 reference)."""
    return (p.load(runs["bf16"], runs["mul"], "output", 0),
            p.load(runs["fp32"], runs["mul"], "output", 0).astype(np.float64))


def freqs_reference(runs):
    fp32 = runs["fp32"]
    return np.load(p.tensor_file(fp32, "freqs", "output", 0) or
                   p.tensor_file(fp32, "freqs", "input", 0))


def test_compare_names_sin_its_chain_and_freqs(runs, compared):
    fp32, bf16, names, sin, mul, line = (runs[k] for k in
                                         ("fp32", "bf16", "names", "sin", "mul", "line"))
    code, err, j = compared
    chain_ops = ["cumsum", "unsqueeze", "mul", "sin"]
    assert code == 1, f"sin adds error: {err}"
    first = j["first_adding_error"]
    assert first["kernel"] == sin, "compare's first divergence"
    assert [c["kernel"] for c in j["contributors"]] == [sin], "no other kernel adds error"
    mul_out, mul_ref = mul_error(runs)
    rounded = torch.from_numpy(mul_ref).to(torch.bfloat16).double().numpy()
    difference, rounding = p.norm_rel(mul_out, mul_ref), p.norm_rel(rounded, mul_ref)
    assert (abs(first["input_error"] - difference) <= 1e-6 * difference and
            abs(first["input_rounding"] - rounding) <= 1e-6 * rounding), (
        f"sin's input error {first['input_error']} and rounding {first['input_rounding']} "
        f"are NumPy's {difference}, {rounding}")
    assert first["inputs_near_rounding"] and difference <= ROUNDING_MULTIPLE * rounding, (
        f"sin's inputs differ by {difference / rounding:.3g} times their rounding")
    assert first["output_error"] > 0.1 and first["growth"] >= 10, f"sin's output: {first}"
    assert "ill-conditioned or inaccurate at bfloat16" in first["reason"], (
        f"compare's words: {first['reason']}")
    chain = first["float32_chain"]
    assert [op_of(k["kernel"]) for k in chain["kernels"]] == chain_ops, (
        "the chain producing sin's inputs, in execution order")
    lines = {op_of(k["kernel"]): k["source_line"] for k in chain["kernels"]}
    for op, marker in (("cumsum", "POS_LINE"), ("mul", "ANGLE_LINE"), ("sin", "SIN_LINE")):
        assert lines[op].endswith(line[marker]), f"{op} at {line[marker]}: {lines[op]}"
    assert ([(q["parameter"], q["dtype"], q["consumer"], q["within_standard"])
                 for q in chain["parameters"]] == [("freqs", "bfloat16", mul, True)]), (
        "freqs, rounded to bfloat16, read by mul, within the bfloat16 standard")
    freqs_ref = freqs_reference(runs)
    assert (abs(chain["parameters"][0]["error"] -
                p.norm_rel(torch.from_numpy(freqs_ref).to(torch.bfloat16).double().numpy(),
                           freqs_ref)) <= 1e-6), (
        f"freqs' error: {chain['parameters']}")
    assert chain["keep_fp32"] == [k["kernel"] for k in chain["kernels"]] + ["freqs"], (
        "the --keep-fp32 entries")
    assert all(k["error_origin"] in (None, sin) for k in j["kernels"]), (
        "no kernel names another origin")
    kernels = {k["kernel_a"]: k for k in j["kernels"]}
    for name in names[:names.index(sin)]:
        assert (kernels[name]["verdict"] != "error" and not kernels[name]["adds_error"] and
                kernels[name]["error_origin"] is None), (
            f"{name} before sin adds no error: {kernels[name]['reason']}")


def test_compare_text_advice(runs):
    fp32, bf16, names, sin, mul, line = (runs[k] for k in
                                         ("fp32", "bf16", "names", "sin", "mul", "line"))
    code, out, err = t.run("compare", bf16, fp32, "-q")
    advice = out.split("first divergence:")[1]
    assert ("keep in float32 (--keep-fp32) the kernel and the chain that produces its inputs "
            "(4 kernels, 1 parameter):" in advice and
            "parameter freqs: rounded to bfloat16 (norm rel err" in advice and
            f"within the bfloat16 standard), read by {mul} at " in advice and
            all(line[m] in advice for m in line)), (
        f"compare's text advice: {advice}")


def test_replay_calls_sin_ill_conditioned(runs, compared):
    fp32, bf16, names, sin, mul, line = (runs[k] for k in
                                         ("fp32", "bf16", "names", "sin", "mul", "line"))
    chain = chain_of(compared)
    mul_out, mul_ref = mul_error(runs)
    # replay: ill-conditioned, with the same chain; the kernels before it are accurate.
    code, out, err = t.run("replay", bf16, sin, "--reference", fp32, "--json", env=p.ONE_THREAD)
    assert code == 0, f"replay sin: {err}"
    r = json.loads(out)
    assert r["verdict"] == "ill-conditioned", f"replay's verdict: {r['reason']}"
    assert (r["inputs_near_rounding"] and
            r["input_difference"] <= ROUNDING_MULTIPLE * r["input_rounding"]), (
        f"replay measures sin's inputs near their rounding: {r}")
    assert abs(r["input_difference"] - p.norm_rel(mul_out, mul_ref)) <= 1e-6, (
        f"replay's input difference is NumPy's: {r['input_difference']}")
    assert r["float32_chain"]["keep_fp32"] == chain["keep_fp32"], (
        "replay names the chain compare names")
    assert r["float32_chain"]["parameters"] == chain["parameters"], "and the same freqs"
    code, text, err = t.run("replay", bf16, sin, "--reference", fp32, env=p.ONE_THREAD)
    assert ("verdict    ill-conditioned:" in text and "parameter freqs: rounded to bfloat16" in
            text and line["POS_LINE"] in text), (
        f"replay's text: {text}")
    for name in names[:names.index(sin)]:
        code, out, err = t.run("replay", bf16, name, "--reference", fp32, "--json",
                               env=p.ONE_THREAD)
        v = json.loads(out)
        assert v["verdict"] in ("accurate", "not replayable"), (
            f"{name} before sin: {v['verdict']}: {v['reason']}")
        if op_of(name) in ("cumsum", "mul"):
            assert v["verdict"] == "accurate", f"{name}: {v['reason']}"


def test_compare_and_report_replay(module_scratch, runs):
    fp32, bf16, names, sin, mul, line = (runs[k] for k in
                                         ("fp32", "bf16", "names", "sin", "mul", "line"))
    # compare --replay and report --replay: the same verdict and chain.
    code, out, err = t.run("compare", bf16, fp32, "-q", "--replay", "1", "--json")
    rep = json.loads(out)["replays"]
    assert rep[0]["kernel"] == sin and rep[0]["replay"]["verdict"] == "ill-conditioned", (
        f"compare --replay: {rep}")
    html_path = os.path.join(module_scratch, "report.html")
    code, out, err = t.run("report", "--compare", bf16, fp32, "--replay", "1", "-o", html_path)
    assert code == 0, f"report: {err}"
    with open(html_path) as f:
        html = f.read()
    row = html.split(f'<tr data-kernel="{sin}">')[1].split("</tr>")[0]
    assert ('<td class="replay-verdict"><b>ill-conditioned</b>' in row and
            "parameter freqs: rounded to bfloat16" in row and line["ANGLE_LINE"] in row), (
        f"the report's row of sin: {row}")


@pytest.fixture(scope="module")
def ref(module_scratch):
    return run_output(module_scratch, "ref", "--precision", "fp32")


def test_the_chain_meets_the_tolerance(module_scratch, compared, ref):
    chain = chain_of(compared)
    # The chain compare names, kept in float32, brings the error under the tolerance.
    plain = run_output(module_scratch, "plain", "--precision", "bf16")
    chain_out = run_output(module_scratch, "chain", "--precision", "bf16", "--keep-fp32",
                           *chain["keep_fp32"])
    kernels_only = run_output(module_scratch, "kernels_only", "--precision", "bf16", "--keep-fp32",
                              *chain["keep_fp32"][:-1])
    assert (p.norm_rel(plain, ref) > 0.1 and p.norm_rel(chain_out, ref) <= TOLERANCE <
            p.norm_rel(kernels_only, ref)), (
        f"errors: bf16 {p.norm_rel(plain, ref)}, chain and freqs kept "
        f"{p.norm_rel(chain_out, ref)}, chain without freqs {p.norm_rel(kernels_only, ref)}")


def test_bisect_keeps_freqs(module_scratch, runs, ref):
    sin = runs["sin"]
    # bisect at the default tolerance: the set holds freqs; its command meets the tolerance.
    code, out, err = t.run("bisect", p.model("pos_enc"), "--input", p.data("pos_x.npy"),
                           "--precision", "bf16", "--json", env=p.ONE_THREAD)
    assert code == 0, f"bisect: {err[-1500:]}"
    b = json.loads(out)
    kept = [k["full_name"] for k in b["keep"]]
    assert (b["outcome"] == "found" and "freqs" in kept and sin in kept and
            b["error"] <= TOLERANCE), (
        f"bisect keeps freqs and sin: {kept} {b['error']}")
    assert any(k["full_name"] == "freqs" and k["op_type"] == "parameter" for k in b["keep"]), (
        f"freqs is a parameter: {b['keep']}")
    words = shlex.split(b["command"])
    assert words[:2] == ["graphdump", "run"] and "freqs" in words, f"command: {b['command']}"
    fixed = os.path.join(module_scratch, "fixed.npy")
    t.run(*words[1:], "--save-output", fixed, env=p.ONE_THREAD, check=0)
    got = p.norm_rel(np.load(fixed), ref)
    assert got <= TOLERANCE and abs(got - b["error"]) <= 1e-9, (
        f"`{b['command']}` gives {got}, bisect said {b['error']}")
    code, out, err = t.run("bisect", p.model("pos_enc"), "--input", p.data("pos_x.npy"),
                           "--precision", "bf16", env=p.ONE_THREAD)
    assert ("parameter or buffer" in out and "  freqs (parameter or buffer, float32 values)"
            in out), (
        f"bisect's text names freqs: {out}")


def test_keep_fp32_of_a_parameter(module_scratch, runs):
    freqs_ref = freqs_reference(runs)
    # --keep-fp32 of a parameter: its dump is float32; a name that is nothing is a usage error.
    kept_dump, _, _ = p.dump_run(module_scratch, "kept", "pos_enc", ["pos_x.npy"],
                                 "--precision", "bf16", "--keep-fp32", "freqs")
    path = p.tensor_file(kept_dump, "freqs", "output", 0) or p.tensor_file(kept_dump, "freqs",
                                                                           "input", 0)
    assert (path is not None and p.dtype_of(path) == "float32" and
            np.array_equal(np.load(path), freqs_ref)), (
        f"freqs kept in float32: {path}")
    code, out, err = t.run("run", p.model("pos_enc"), "--input", p.data("pos_x.npy"),
                           "--precision", "bf16", "--keep-fp32", "nosuch")
    assert (code == 2 and "'nosuch' selects no kernel" in err and
            "a parameter or buffer is kept by its dotted name (freqs)" in err), (
        f"usage error: {code} {err}")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
