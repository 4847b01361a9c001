"""graphdump hunt tells the truth about its second run (docs/hunt.md, "Did it reproduce?"), on
hunt_training.py's masked mean (a 0/0 planted at step 3, row 4):

- a script that catches SystemExit around optimizer.step() and trains on: the hit is still
  iteration 3 (not the last iteration it trained on to), persistent; both passes' run-on noted;
- a script that resumes from its own checkpoint: the rerun is not the same run (its iteration 2
  differs): "unconfirmed", answered from pass 1 (iteration 3, the div kernel), exit 1;
- a rerun that fails before the hit (the script os.mkdirs its output directory): pass 1's
  answer, "unconfirmed", "did not reach iteration 3", exit 1 (not exit 3 with no answer);
- the same count of NaN in the same tensor with other values on the rerun: transient, not
  persistent (statistics are compared, not counts);
- a float16 overflow (finite values beyond 65504) found through pass 1's statistics: persistent
  (pass 1's statistic row and pass 2's have the same values; watch words them differently);
- training inside torch.multiprocessing.spawn: graphdump python captures nothing there, and
  the hunt says so (exit 3), never "no hit";
- a script whose name has non-ASCII letters runs (exit 0, no hit).
"""
import json
import os
import shutil

import gdtest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hunt_training.py")


def hunt(root, *args, checks=None):
    options = ["--checks", checks] if checks else []
    code, out, err = gdtest.run("hunt", *options, "--dump-path", root, SCRIPT, *args)
    answer = {}
    if os.path.exists(os.path.join(root, "answer.json")):
        with open(os.path.join(root, "answer.json"), encoding="utf-8") as f:
            answer = json.load(f)
    return code, out, err, answer


def test_script_catches_system_exit(scratch):
    code, out, err, answer = hunt(os.path.join(scratch, "h"), "--plant", "3", "--row", "4",
                                  "--steps", "6", "--catch-exit")
    assert code == 1, f"a hit\n{out}\n{err}"
    assert answer.get("iteration") == 3, f"the hit iteration, not a later one: {out}"
    assert answer.get("verdict") == "persistent", f"{answer.get('verdict_detail')}"
    assert answer.get("kernel", "").startswith("Default/div-op"), answer.get("kernel")
    assert answer.get("pass1_ran_on") == 5 and answer.get("pass2_ran_on") == 5, \
        f"the iterations the script trained on to: {answer}"
    assert "trained on to iteration 5" in err, err


def test_script_resumes_from_its_checkpoint(scratch):
    checkpoint = os.path.join(scratch, "checkpoint.pt")
    code, out, err, answer = hunt(os.path.join(scratch, "h"), "--plant", "3", "--row", "4",
                                  "--steps", "8", "--resume", checkpoint)
    assert code == 1, f"a hit, from pass 1\n{out}\n{err}"
    assert answer.get("verdict") == "unconfirmed", f"{answer.get('verdict_detail')}"
    assert "not the same run" in answer["verdict_detail"] and \
        "iteration 2 differs" in answer["verdict_detail"], answer["verdict_detail"]
    assert answer.get("iteration") == 3, "pass 1's iteration"
    assert answer.get("kernel", "").startswith("Default/div-op"), answer.get("kernel")
    assert float(answer["runs"]["pass1"]["NaN Count"]) == 8, answer["runs"]
    assert "unconfirmed" in out and "the answer is the first run's" in out, out
    assert answer.get("report"), f"a report of pass 1: {answer.get('report_error')}"


def test_rerun_fails_before_the_hit(scratch):
    code, out, err, answer = hunt(os.path.join(scratch, "h"), "--plant", "3", "--row", "4",
                                  "--steps", "5", "--mkdir", os.path.join(scratch, "out"))
    assert code == 1, f"pass 1's answer, not exit 3\n{out}\n{err}"
    assert answer.get("verdict") == "unconfirmed", answer
    assert ("did not reach iteration 3" in answer["verdict_detail"] and
            "exit status 1" in answer["verdict_detail"]), answer["verdict_detail"]
    assert answer.get("kernel", "").startswith("Default/div-op"), answer.get("kernel")
    assert answer.get("tensor_dump") is None, "no tensors of a run that did not reach the hit"
    assert "FileExistsError" in err, "the rerun's own error is shown"
    assert answer.get("report"), f"a report of pass 1: {answer.get('report_error')}"


def test_same_count_other_values_is_transient(scratch):
    code, out, err, answer = hunt(os.path.join(scratch, "h"), "--plant", "2", "--steps", "4",
                                  "--vary", os.path.join(scratch, "varied"))
    assert code == 1, f"a hit\n{out}\n{err}"
    assert answer.get("iteration") == 2, answer
    assert answer.get("verdict") == "transient", f"{answer.get('verdict_detail')}"
    assert "other statistics" in answer["verdict_detail"], answer["verdict_detail"]
    runs = answer["runs"]
    assert runs["pass1"]["NaN Count"] == runs["pass2"]["NaN Count"], runs
    assert float(runs["pass1"]["Max Value"]) != float(runs["pass2"]["Max Value"]), runs


def test_overflow_through_statistics_is_persistent(scratch):
    code, out, err, answer = hunt(os.path.join(scratch, "h"), "--blowup", "2", "--steps", "4",
                                  checks="nan,inf,overflow")
    assert code == 1, f"a hit\n{out}\n{err}"
    assert answer.get("iteration") == 2, answer
    assert answer.get("check") == "overflow", answer
    assert answer.get("verdict") == "persistent", f"{answer.get('verdict_detail')}"


def test_training_in_spawned_processes(scratch):
    code, out, err, answer = hunt(os.path.join(scratch, "h"), "--plant", "2", "--steps", "4",
                                  "--spawn")
    assert code == 3, f"no answer, never 'no hit'\n{out}\n{err}"
    assert "no hit" not in out, out
    assert "captured no iteration" in out and "spawn" in out, out


def test_non_ascii_script_name(scratch):
    script = os.path.join(scratch, "tränîng_ü.py")
    shutil.copy(SCRIPT, script)
    code, out, err = gdtest.run("hunt", "--dump-path", os.path.join(scratch, "h"), script,
                                "--steps", "2")
    assert code == 0, f"no hit\n{out}\n{err}"
    assert "ended normally with no hit" in out, out
