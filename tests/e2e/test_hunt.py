"""graphdump hunt on hunt_training.py, a masked-mean classifier run unchanged (docs/hunt.md):

- a data-dependent 0/0 planted at step 3 (row 4 of that batch is all padding): exit 1; the
  answer (stdout and answer.json) names iteration 3, the div kernel, the pooling line, the first
  bad element [4, 0] and batch row 4, "persistent", "created", and the divisor (input 1) whose
  row 4 is all zero, checked against the tensor file with NumPy; pass 2's tensor dump holds
  exactly iterations 2 and 3, every .npy loads with numpy.load, and no temporary file is left;
  pass 1 stopped after the hit (no statistic.csv past iteration 3); pass 2's execution order is
  forward-first (the hit before the backward), as a plain run's; report.html opens on the
  answer;
- a NaN injected into embed's output on the first run only (graphdump.hunt() from Python):
  status hit, verdict "transient", both runs' statistics of the tensor side by side;
- attention scores masked with masked_fill(-inf) on every step, a fully masked sequence at step
  2: the masks are no hit; softmax at iteration 2 created the NaN from intended infinities;
- a script that never goes bad: exit 0, "no hit", every iteration's statistics kept;
- a script that crashes at step 2: exit 3, the message names the exit status, nothing torn;
- usage errors: exit 2 with the reason (bad --checks, missing script, a dump path that cannot
  be made, an earlier hunt).
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np

import gdtest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hunt_training.py")


def _pooling_line():
    """'hunt_training.py:N', N the line of the masked mean's division."""
    with open(SCRIPT, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if "pooled = h.sum(1) / mask.sum(1, keepdim=True)" in line:
                return f"hunt_training.py:{number}"
    raise AssertionError("hunt_training.py has no pooling line")


POOLING_LINE = _pooling_line()


def no_temporaries(root):
    left = [p for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
            if ".tmp" in os.path.basename(p)]
    assert left == [], f"temporary files left under {root}"


def iterations_of(dump):
    return sorted({int(os.path.basename(d)) for d in
                   glob.glob(os.path.join(dump, "rank_0", "*", "0", "[0-9]*"))})


def loaded_dynamo(report):
    """--report-dynamo's lines: (hunt pass mode, whether torch._dynamo was loaded already)."""
    with open(report, encoding="utf-8") as f:
        return [tuple(line.split()) for line in f.read().splitlines()]


def test_planted(scratch):
    root = os.path.join(scratch, "planted")
    report = os.path.join(scratch, "planted_dynamo")
    code, out, err = gdtest.run("hunt", "--dump-path", root, SCRIPT, "--plant", "3", "--row",
                                "4", "--steps", "8", "--report-dynamo", report)
    assert code == 1, f"hunt exit status on a planted 0/0\n{err}"
    assert "nan at iteration 3" in out, f"the answer names iteration 3:\n{out}"
    assert "persistent" in out, "persistent"
    assert "created" in out, "created from finite inputs"
    assert POOLING_LINE in out, f"the pooling line {POOLING_LINE} is printed"
    assert "first bad element: [4, 0], batch row 4" in out, "the element and the batch row"
    assert "input 1 float32 (6, 1)" in out and "row 4: all 1 element(s) zero" in out, \
        "the divisor's row 4 is all zero"
    with open(os.path.join(root, "answer.json"), encoding="utf-8") as f:
        answer = json.load(f)
    assert ((answer["status"], answer["verdict"], answer["origin"]) ==
            ("hit", "persistent", "created")), "answer.json's verdict"
    assert answer["iteration"] == 3, "answer iteration"
    assert answer["kernel"].startswith("Default/div-op"), f"the kernel: {answer['kernel']}"
    assert answer["statistics_kernel"].startswith("Default/div-op"), \
        f"pass 1's name of it: {answer['statistics_kernel']}"
    assert answer["source_line"].endswith(POOLING_LINE), f"line {answer['source_line']}"
    assert answer["first_index"] == [4, 0], "first bad element"
    assert answer["row"] == 4, "batch row"
    divisor = answer["creator"]["inputs"][1]
    assert divisor["all_zero_rows"] == [4], "the divisor's all-zero rows"
    assert divisor["row"]["all_zero"], "the divisor's row 4 is all zero"
    data = np.load(divisor["file"])
    assert data.shape == (6, 1), "the divisor's shape in its file"
    assert data[4, 0] == 0 and (np.delete(data, 4, axis=0) > 0).all(), \
        f"the divisor file: row 4 zero, the others not: {data.ravel()}"
    pattern = os.path.join(answer["tensor_dump"], "**", "*div-op*.output.0.*.npy")
    out_files = [p for p in glob.glob(pattern, recursive=True) if "/3/" in p]
    assert len(out_files) == 1, "one div output file in iteration 3"
    if out_files:
        value = np.load(out_files[0])
        assert np.isnan(value[4]).all() and np.isfinite(np.delete(value, 4, axis=0)).all(), \
            "the div output's row 4 is NaN, the others finite"
    assert (iterations_of(answer["tensor_dump"]) ==
            [2, 3]), "the tensor dump holds exactly the two iterations"
    with open(os.path.join(answer["tensor_dump"], "rank_0", "execution_order",
                           "ms_execution_order_graph_0.csv"), encoding="utf-8") as f:
        order = f.read().splitlines()[1:]
    assert order[0].startswith("Default/embed-Linear/"), \
        f"pass 2's execution order is forward-first, as a plain run's: {order[:3]}"
    assert order.index(answer["kernel"]) < min(
        i for i, k in enumerate(order) if k.startswith("Gradients/")), \
        "the first hit (forward) comes before the backward"
    assert (iterations_of(answer["statistics_dump"]) ==
            [0, 1, 2, 3]), "pass 1 stopped after the hit iteration"
    npys = glob.glob(os.path.join(root, "**", "*.npy"), recursive=True)
    assert len(npys) > 50, f"tensor files written: {len(npys)}"
    for path in npys:
        np.load(path)
    no_temporaries(root)
    with open(answer["report"], encoding="utf-8") as f:
        page = f.read()
    top = page.find('<section id="hunt-answer">')
    assert 0 < top < page.find("<section id=\"plots\">"), "the report opens on the answer"
    assert "Default/div-op" in page[top:top + 4000], "the report's answer names the kernel"
    # Pass 2 imported what the script's optimizer imports while pass 1 ran (docs/hunt.md).
    assert loaded_dynamo(report) == [("first-hit", "False"), ("stop-after", "True")], \
        f"torch._dynamo loaded before pass 2's script only: {loaded_dynamo(report)}"
    assert not os.path.exists(os.path.join(root, ".hunt")), "the hunt's state is removed"
    code, _, err = gdtest.run("hunt", "--dump-path", root, SCRIPT, "--plant", "3")
    assert code == 2, "an earlier hunt in the dump path is a usage error"
    assert "holds an earlier hunt" in err and "--overwrite" in err, f"says why: {err}"


def test_transient(scratch):
    root = os.path.join(scratch, "transient")
    marker = os.path.join(scratch, "fault_seen")
    report = os.path.join(scratch, "transient_dynamo")
    env = dict(os.environ, PYTHONPATH=os.path.join(gdtest.BUILD_DIR, "python"))
    program = ("import json, sys, graphdump\n"
               f"a = graphdump.hunt(sys.argv[1], sys.argv[2:], dump_path={root!r})\n"
               "print(json.dumps(a))\n")
    # --set-env: the script changes its environment before its optimizer imports torch._dynamo,
    # so pass 2 leaves that import to the script.
    p = subprocess.run([sys.executable, "-c", program, SCRIPT, "--plant", "2",
                        "--transient", marker, "--steps", "5", "--set-env",
                        "--report-dynamo", report],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, f"graphdump.hunt() ran\n{p.stderr}"
    answer = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
    assert answer.get("status") == "hit", "a hit in the first run"
    assert answer.get("verdict") == "transient", "not reproduced on the rerun"
    assert answer.get("iteration") == 2, "the iteration of the fault"
    assert "embed-Linear" in answer.get("kernel", ""), \
        f"the injected kernel: {answer.get('kernel')}"
    runs = answer.get("runs") or {}
    assert runs.get("pass1") is not None and float(runs["pass1"]["NaN Count"]) > 0, \
        f"pass 1's statistics of the tensor hold the NaN: {runs.get('pass1')}"
    assert runs.get("pass2") is not None and float(runs["pass2"]["NaN Count"]) == 0, \
        f"pass 2's statistics of the same tensor are clean: {runs.get('pass2')}"
    assert loaded_dynamo(report) == [("first-hit", "False"), ("stop-after", "False")], \
        f"not loaded for a script that changed its environment first: {loaded_dynamo(report)}"
    no_temporaries(root)


def test_intended_infinities(scratch):
    root = os.path.join(scratch, "attention")
    script = os.path.join(os.path.dirname(SCRIPT), "hunt_attention.py")
    code, out, err = gdtest.run("hunt", "--checks", "nan,inf", "--dump-path", root, script)
    assert code == 1, f"hunt on a fully masked attention row\n{err}"
    with open(os.path.join(root, "answer.json"), encoding="utf-8") as f:
        answer = json.load(f)
    assert answer["iteration"] == 2, "the masks of steps 0 and 1 are no hit"
    assert answer["kernel"].startswith("Default/softmax-op"), f"softmax: {answer['kernel']}"
    assert answer["origin"] == "created", "softmax created the NaN"
    assert "wrote on purpose" in answer["origin_detail"], answer["origin_detail"]
    scores = answer["creator"]["inputs"][0]
    assert ((scores["row"]["index"], scores["row"]["nonfinite"]) ==
            (1, 25)), "row 1 of the scores is all -inf"
    assert "row 1: all 25 element(s) non-finite" in out, out


def test_never_bad(scratch):
    root = os.path.join(scratch, "clean")
    code, out, err = gdtest.run("hunt", "--dump-path", root, SCRIPT, "--steps", "3")
    assert code == 0, f"no hit: exit 0\n{err}"
    assert "ended normally with no hit" in out, f"says so: {out}"
    assert iterations_of(os.path.join(root, "pass1")) == [0, 1, 2], "every iteration kept"
    assert not os.path.exists(os.path.join(root, "pass2")), "no second pass"


def test_crashes(scratch):
    root = os.path.join(scratch, "crash")
    code, out, err = gdtest.run("hunt", "--dump-path", root, SCRIPT, "--crash-at", "2",
                                "--plant", "4")
    assert code == 3, f"a script failing before any hit: exit 3\n{err}"
    assert "failed (exit status 1) before any hit" in out, f"says so: {out}"
    assert "the data loader failed at step 2" in err, "the script's own error is shown"
    assert os.path.exists(os.path.join(root, "pass1", "rank_0", ".dump_metadata", "INCOMPLETE")), \
        "the statistic dump is marked incomplete"
    no_temporaries(root)


def test_usage(scratch):
    code, _, err = gdtest.run("hunt", "--checks", "nan,zero", SCRIPT)
    assert code == 2, "bad --checks"
    assert "zero is not a check hunt takes" in err and "nan, inf, overflow" in err, err
    code, _, err = gdtest.run("hunt", os.path.join(scratch, "missing.py"))
    assert code == 2, "missing script"
    assert "missing.py: no such file" in err, err
    blocker = os.path.join(scratch, "a_file")
    open(blocker, "w").close()
    code, _, err = gdtest.run("hunt", "--dump-path", os.path.join(blocker, "hunt"), SCRIPT)
    assert code == 2, "a dump path that cannot be made"
    assert "a_file/hunt: cannot be prepared: Not a directory" in err, err
    code, out, _ = gdtest.run("hunt", "--help")
    assert code == 0 and "pass 2" in out and "exit status" in out, "--help teaches"
