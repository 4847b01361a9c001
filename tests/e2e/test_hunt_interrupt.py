#!/usr/bin/python3
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
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import gdtest  # noqa: E402
from gdtest import expect, expect_eq  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hunt_training.py")


def main():
    work = gdtest.temp_dir()
    try:
        root = os.path.join(work, "hunt")
        marker = os.path.join(work, "started")
        hunt = subprocess.Popen([gdtest.BIN, "hunt", "--dump-path", root, SCRIPT, "--steps",
                                 "400", "--sleep", "0.1", "--marker", marker],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        deadline = time.monotonic() + 300
        while not os.path.exists(marker) and time.monotonic() < deadline and hunt.poll() is None:
            time.sleep(0.1)
        expect(os.path.exists(marker), "the script started")
        time.sleep(0.5)
        os.killpg(hunt.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, err = hunt.communicate(timeout=300)
        expect_eq(hunt.returncode, 130, f"exit status after Ctrl-C\n{out}\n{err}")
        expect("graphdump hunt: interrupted" in err, f"says so: {err}")
        expect("KeyboardInterrupt" in err, "the script unwound with KeyboardInterrupt")
        steps = [line for line in out.splitlines() if line.startswith("step ")]
        expect(0 < len(steps) < 400, f"the script was ended early: {len(steps)} steps")
        left = [p for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
                if ".tmp" in os.path.basename(p)]
        expect_eq(left, [], "temporary files left")
        for name in ("answer.json", "report.html", "pass2"):
            expect(not os.path.exists(os.path.join(root, name)), f"no {name}")
        tables = glob.glob(os.path.join(root, "pass1", "rank_0", "*", "0", "*", "statistic.csv"))
        expect(len(tables) >= 2, f"statistic.csv of the iterations run: {len(tables)}")
        for path in tables:
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
            widths = {len(r) - (1 if r and r[-1] == "" else 0) for r in rows[1:]}
            expect(len(rows) > 1 and widths == {len(rows[0])}, f"{path} is whole")
        incomplete = os.path.join(root, "pass1", "rank_0", ".dump_metadata", "INCOMPLETE")
        expect(os.path.exists(incomplete), "the interrupted dump is marked incomplete")
    finally:
        gdtest.cleanup(work)
    gdtest.finish()


if __name__ == "__main__":
    main()
