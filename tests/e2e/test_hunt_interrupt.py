"""Ctrl-C during graphdump hunt (docs/hunt.md): SIGINT to the hunt's process group while pass 1
runs a long, clean training:

- exit 130 and a message saying it was interrupted, with no answer;
- the script was ended long before its last step, and its dump closed: no temporary file,
  every statistic.csv whole (each row has the header's fields), .dump_metadata/INCOMPLETE
  saying why; no answer.json, no report.html.
"""
import csv
import glob
import os
import signal
import subprocess
import time

import gdtest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hunt_training.py")


def test_interrupted_hunt_leaves_whole_files(scratch):
    root = os.path.join(scratch, "hunt")
    marker = os.path.join(scratch, "started")
    hunt = subprocess.Popen([gdtest.BIN, "hunt", "--dump-path", root, SCRIPT, "--steps",
                             "400", "--sleep", "0.1", "--marker", marker],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(marker) and time.monotonic() < deadline and hunt.poll() is None:
        time.sleep(0.1)
    assert os.path.exists(marker), "the script started"
    time.sleep(0.5)
    os.killpg(hunt.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = hunt.communicate(timeout=300)
    assert hunt.returncode == 130, f"exit status after Ctrl-C\n{out}\n{err}"
    assert "graphdump hunt: interrupted" in err, f"says so: {err}"
    assert "KeyboardInterrupt" in err, "the script unwound with KeyboardInterrupt"
    steps = [line for line in out.splitlines() if line.startswith("step ")]
    assert 0 < len(steps) < 400, f"the script was ended early: {len(steps)} steps"
    left = [p for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
            if ".tmp" in os.path.basename(p)]
    assert left == [], "temporary files left"
    for name in ("answer.json", "report.html", "pass2"):
        assert not os.path.exists(os.path.join(root, name)), f"no {name}"
    tables = glob.glob(os.path.join(root, "pass1", "rank_0", "*", "0", "*", "statistic.csv"))
    assert len(tables) >= 2, f"statistic.csv of the iterations run: {len(tables)}"
    for path in tables:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        widths = {len(r) - (1 if r and r[-1] == "" else 0) for r in rows[1:]}
        assert len(rows) > 1 and widths == {len(rows[0])}, f"{path} is whole"
    incomplete = os.path.join(root, "pass1", "rank_0", ".dump_metadata", "INCOMPLETE")
    assert os.path.exists(incomplete), "the interrupted dump is marked incomplete"
