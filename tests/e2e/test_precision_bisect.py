"""`graphdump bisect` (docs/precision.md, "Bisect"): on sum_net (a bfloat16 index_add that is ~45%
wrong) and naive_var (E[x^2] - E[x]^2 cancelling) it finds the kernels that must run in float32; the set
meets the tolerance, removing any one of its kernels does not (checked with separate `graphdump
run` processes), and the printed `graphdump run ... --keep-fp32 ...` command, run with
--save-output, reproduces the error bisect reported, checked with NumPy against the float32
run's output. Bad input gives exit 2 and a message; an unreachable tolerance exits 1; a model
that already matches exits 0 with nothing to keep."""
import json
import os
import shlex
import sys

import numpy as np
import pytest

import gdtest as t
import precision_fixture as p

def bisect(*args):
    return t.run("bisect", *args, env=p.ONE_THREAD)


def run_output(work, model_name, inputs, name, *extra):
    """The model's output of `graphdump run` with `extra` flags, read with NumPy."""
    out = os.path.join(work, name + ".npy")
    args = ["run", p.model(model_name)]
    for i in inputs:
        args += ["--input", p.data(i)]
    t.run(*args, *extra, "--save-output", out, env=p.ONE_THREAD, check=0)
    return np.load(out)


def reproduce(work, command, name):
    """Runs the command bisect printed (its `graphdump` replaced by the binary under test) with
    --save-output; returns the output."""
    words = shlex.split(command)
    assert words[:2] == ["graphdump", "run"], f"a graphdump run command: {command}"
    out = os.path.join(work, name + ".npy")
    t.run(*words[1:], "--save-output", out, env=p.ONE_THREAD, check=0)
    return np.load(out)


def check_model(work, model_name, inputs, tolerance, expected_ops):
    """Bisects MODEL in bf16; checks the set, its minimality and its reproduction. Returns the
    JSON result."""
    ins = []
    for i in inputs:
        ins += ["--input", p.data(i)]
    code, out, err = bisect(p.model(model_name), *ins, "--precision", "bf16", "--tolerance",
                            str(tolerance), "--json")
    assert code == 0, f"bisect {model_name}: {err[-800:]}"
    r = json.loads(out)
    keep = [k["full_name"] for k in r["keep"]]
    assert r["outcome"] == "found", f"{model_name}: a set is found"
    assert sorted(n.rsplit("/", 1)[-1].rsplit("-op", 1)[0] for n in keep) == sorted(expected_ops), (
        f"{model_name}: the kernels kept")
    assert r["error"] <= tolerance < r["error_none"], (
        f"{model_name}: error {r['error']} with the set, {r['error_none']} without")
    assert r["error_all"] <= tolerance, f"{model_name}: all kept {r['error_all']}"
    # Each round is printed on stderr as it runs, with its error and verdict.
    round_lines = [line for line in err.splitlines() if line.startswith("round ")]
    assert len(round_lines) == len(r["rounds"]), f"{model_name}: a line per round"
    assert (all((rd["error"] is not None and rd["error"] <= tolerance) == rd["pass"]
                for rd in r["rounds"])), (
        f"{model_name}: pass means error <= tolerance")
    assert [rd["phase"] for rd in r["rounds"][:2]] == ["none", "all"], (
        f"{model_name}: nothing kept, then every candidate")
    assert any(rd["phase"] == "prune" for rd in r["rounds"]) or len(keep) <= 1, (
        f"{model_name}: pruning rounds")

    ref = run_output(work, model_name, inputs, model_name + "_fp32", "--precision", "fp32")
    plain = run_output(work, model_name, inputs, model_name + "_bf16", "--precision", "bf16")
    assert abs(p.norm_rel(plain, ref) - r["error_none"]) <= 1e-9 * max(1, r["error_none"]), (
        f"{model_name}: bisect's error with nothing kept {r['error_none']} is that of "
        f"`run --precision bf16` {p.norm_rel(plain, ref)}")

    # The printed command reproduces the set's error.
    fixed = reproduce(work, r["command"], model_name + "_fixed")
    err_fixed = p.norm_rel(fixed, ref)
    assert err_fixed <= tolerance and abs(err_fixed - r["error"]) <= 1e-9, (
        f"{model_name}: `{r['command']}` gives error {err_fixed}, bisect said {r['error']}")

    # 1-minimal: without any one kernel of the set the error exceeds the tolerance.
    for drop in keep:
        rest = [k for k in keep if k != drop]
        extra = ["--precision", "bf16"] + (["--keep-fp32", *rest] if rest else [])
        got = p.norm_rel(run_output(work, model_name, inputs, model_name + "_drop", *extra), ref)
        assert got > tolerance, (
            f"{model_name}: without {drop} the error {got} exceeds "
            f"{tolerance}")
    return r


@pytest.fixture(scope="module")
def summed(module_scratch):
    """bisect's JSON result on sum_net, checked by check_model."""
    return check_model(module_scratch, "sum_net", ["sum_x.npy"], 0.01, ["index_add"])


def test_sum_net_keeps_the_index_add(summed):
    k = summed["keep"][0]
    assert k["source_line"] == f"{p.SCRIPT}:{p.source_line('SUM_LINE')}", (
        "the kept index_add's user source line")
    assert "self.total.index_add(0, self.segment, h)" in k["code"], f"its code: {k['code']}"


def test_text_output(summed):
    k = summed["keep"][0]
    # The text output: rounds, the set with source lines, and the command, which runs as is.
    code, out, err = bisect(p.model("sum_net"), "--input", p.data("sum_x.npy"), "--precision",
                            "bf16")
    assert code == 0, f"bisect sum_net (text): {err}"
    lines = out.splitlines()
    assert lines[0].startswith("graphdump bisect:") and "tolerance 0.01" in lines[0], (
        f"header: {lines[0]}")
    assert any(line.startswith("round  1  none") and "FAIL" in line for line in lines), (
        f"round 1 runs nothing kept and fails: {out}")
    assert any(line.startswith("round  2  all") and "pass" in line for line in lines), (
        f"round 2 keeps every candidate and passes: {out}")
    assert "result: 1 kernel must run in float32" in out, f"result line: {out}"
    assert (f"  {k['full_name']} (index_add)  {p.SCRIPT}:{p.source_line('SUM_LINE')}  "
            "s = self.total.index_add" in out), (
        f"the kernel with its source line: {out}")
    command = lines[-1].split("reproduce: ", 1)[-1]
    assert lines[-1].startswith("reproduce: graphdump run "), f"the last line: {lines[-1]}"
    assert command == summed["command"], "text and JSON print the same command"
    assert f"--keep-fp32 '{k['full_name']}'" in command, f"quoted full name: {command}"


def test_naive_var_keeps_the_subtraction(module_scratch):
    var = check_model(module_scratch, "naive_var", ["var_x.npy"], 0.01,
                      ["mul", "mean", "mul", "sub"])
    assert (any(k["op_type"] == "sub" and k["source_line"].endswith(
       f":{p.source_line('VAR_LINE')}") for k in var["keep"])), (
        f"the cancelling subtraction is kept: {var['keep']}")


def test_random_inputs(module_scratch, summed):
    k = summed["keep"][0]
    # Random inputs (--input-shape, --seed): the command repeats them, and reproduces the error.
    code, out, err = bisect(p.model("sum_net"), "--input-shape", "16", "--seed", "3",
                            "--precision", "bf16", "--json")
    assert code == 0, f"bisect with a random input: {err}"
    r = json.loads(out)
    assert ("--input-shape 16 --seed 3 --precision bf16 --keep-fp32" in r["command"]
            and r["keep"][0]["full_name"] == k["full_name"]), (
        f"random input: {r['command']}")
    ref = run_output(module_scratch, "sum_net", [], "random_fp32", "--input-shape", "16",
                     "--seed", "3", "--precision", "fp32")
    got = p.norm_rel(reproduce(module_scratch, r["command"], "random_fixed"), ref)
    assert abs(got - r["error"]) <= 1e-9, f"random input reproduced: {got} vs {r['error']}"


def test_target(summed):
    k = summed["keep"][0]
    # --target: the error of one kernel's outputs. The sum's own output needs the sum.
    code, out, err = bisect(p.model("sum_net"), "--input", p.data("sum_x.npy"), "--precision",
                            "bf16", "--target", "index_add", "--json")
    assert code == 0, f"--target index_add: {err}"
    r = json.loads(out)
    assert (r["target"] == k["full_name"] and [x["full_name"] for x in r["keep"]] ==
            [k["full_name"]] and r["error_none"] > 0.05), (
        f"--target index_add: {r}")
    # The target's output is measured, not the model's: mul's input rounding is not seen.
    code, out, err = bisect(p.model("naive_var"), "--input", p.data("var_x.npy"), "--precision",
                            "bf16", "--target", "name-regex(.*/sub-op[0-9]+)", "--json")
    assert code == 0, f"--target the subtraction: {err}"
    r_sub = json.loads(out)
    assert (r_sub["target"].rsplit("/", 1)[-1].startswith("sub-op")
            and len(r_sub["keep"]) >= 3), (
        f"--target sub: {r_sub['keep']}")


def test_already_matching_model():
    # A model that already matches: exit 0, nothing to keep.
    code, out, err = bisect(p.model("sum_net"), "--input", p.data("sum_x.npy"), "--precision",
                            "bf16", "--tolerance", "0.5")
    assert (code == 0 and "already matches the float32 run" in out
            and "nothing needs float32" in out and "reproduce" not in out), (
        f"already matching: {code} {out} {err}")
    code, out, err = bisect(p.model("sum_net"), "--input", p.data("sum_x.npy"), "--precision",
                            "bf16", "--tolerance", "0.5", "--json")
    r = json.loads(out)
    assert (code == 0 and r["outcome"] == "already_matches" and r["keep"] == []
            and r["command"] is None and len(r["rounds"]) == 1), (
        f"already matching JSON: {r}")


def test_unreachable_tolerance():
    # A tolerance even the all-float32 run misses (the output itself is rounded to bf16): exit 1.
    code, out, err = bisect(p.model("sum_net"), "--input", p.data("sum_x.npy"), "--precision",
                            "bf16", "--tolerance", "1e-6")
    assert (code == 1 and "no set of kernels can meet it" in err and "--tolerance above" in err
            and "round  2  all" in out and "reproduce" not in out), (
        f"unreachable tolerance: {code} {out} {err}")


def test_usage_errors(module_scratch):
    # Usage errors: exit 2 and a message naming the flag.
    base = [p.model("sum_net"), "--input", p.data("sum_x.npy")]
    for args, words in [
        ([], ["no --precision", "bf16 or fp16"]),
        (["--precision", "fp32"], ["--precision fp32", "bf16 or fp16"]),
        (["--precision", "bf16", "--target", "nosuchop"],
         ["--target 'nosuchop' selects no kernel", "--list-kernels"]),
        (["--precision", "bf16", "--tolerance", "-1"], ["--tolerance -1", ">= 0"]),
    ]:
        code, out, err = bisect(*base, *args)
        assert code == 2 and all(w in err for w in words), f"{args}: {code} {err}"
    code, out, err = bisect(p.model("naive_var"), "--input", p.data("var_x.npy"), "--precision",
                            "bf16", "--target", "mul")
    assert code == 2 and "--target 'mul' selects 3 kernels" in err and "full name" in err, (
        f"--target selecting several kernels: {code} {err}")
    code, out, err = bisect(os.path.join(module_scratch, "missing.pt"), "--precision", "bf16")
    assert code == 2 and "missing.pt does not exist" in err, f"missing model: {code} {err}"


def test_help():
    code, out, err = t.run("bisect", "--help")
    assert code == 0 and "examples:" in out and "--tolerance" in out and "exit codes" in out, (
        f"bisect --help: {code} {out}")
    code, out, err = t.run("--help")
    assert "bisect" in out, f"graphdump --help lists bisect: {out}"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
