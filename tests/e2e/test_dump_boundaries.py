"""What the analysis commands read and write stays inside the dump, and what a dump says of
itself is said (docs/analysis.md, docs/reliability.md):

- a dump whose rank is marked `.dump_metadata/INCOMPLETE` (the run did not close it): `ls`,
  `watch`, `compare` and `report` say so, naming the rank and the marker's reason, escaped;
  `ls --json` lists it under `warnings`; the report shows it at its top;
- symbolic links inside a dump (a rank directory, a `.npy` file, a statistic.csv) are refused
  by name, never read: the data they point to appears in no listing, hit or report;
- `compare --out`'s spill file and `bisect`'s rounds go to $TMPDIR: an unusable $TMPDIR is the
  error, named.
"""
import json
import os

import numpy as np

import analysis_dumps as ad
import gdtest


def _marked(root):
    ad.write_dump(root, {0: ad.simple_net()}, stats=True)
    meta = os.path.join(root, "rank_0", ".dump_metadata")
    os.makedirs(meta, exist_ok=True)
    with open(os.path.join(meta, "INCOMPLETE"), "w") as f:
        f.write("The run stopped with an error, so the dump ends there: \x1b[31mRuntimeError\n"
                "second line\n")


def test_incomplete_marker_is_said(scratch):
    root = os.path.join(scratch, "a")
    _marked(root)
    said = "rank_0 is marked incomplete ("
    reason = "The run stopped with an error, so the dump ends there: \\x1b[31mRuntimeError"
    for args in (("ls", root), ("watch", root), ("compare", root, root),
                 ("report", root, "-o", os.path.join(scratch, "r.html"))):
        code, out, err = gdtest.run(*args)
        assert code in (0, 1), f"graphdump {args[0]} ran: {err}"
        assert said in err and reason in err, f"graphdump {args[0]} says so:\n{err}"
        assert "\x1b" not in err, "the marker's text is shown escaped"
    code, out, _ = gdtest.run("ls", root, "--json")
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert len(warnings) == 1 and said in warnings[0], warnings
    with open(os.path.join(scratch, "r.html"), encoding="utf-8") as f:
        page = f.read()
    notes = page.find('<section id="notes">')
    assert 0 < notes < page.find('<section id="plots">'), "the report says it at its top"
    assert "is marked incomplete" in page[notes:notes + 2000], page[notes:notes + 2000]
    # A dump without the marker says nothing of it.
    clean = os.path.join(scratch, "clean")
    ad.write_dump(clean, {0: ad.simple_net()}, stats=True)
    code, _, err = gdtest.run("ls", clean)
    assert code == 0 and "incomplete" not in err, err


def test_links_inside_a_dump_are_refused(scratch):
    root = os.path.join(scratch, "dump")
    ad.write_dump(root, {0: ad.simple_net()}, stats=True)
    # Outside: a rank whose output holds NaN, a NaN tensor, a statistic.csv with a NaN row.
    outside = os.path.join(scratch, "outside")
    bad = ad.simple_net(seed=1)
    bad[0]["outputs"] = [np.full((4, 8), np.nan, dtype=np.float32)]
    ad.write_dump(outside, {0: bad}, rank=1, stats=True)
    os.symlink(os.path.join(outside, "rank_1"), os.path.join(root, "rank_1"))
    iteration = os.path.join(root, "rank_0", "Net", "0", "0")
    secret = os.path.join(outside, "rank_1", "Net", "0", "0")
    nan_file = next(n for n in os.listdir(secret) if n.endswith(".output.0.DefaultFormat."
                                                                 "float32.npy") and "op0" in n)
    planted = os.path.join(iteration, "Conv2D.Default_net-Net_layer0-Layer_Conv2D-op0.0.0."
                                      "9.output.1.DefaultFormat.float32.npy")
    os.symlink(os.path.join(secret, nan_file), planted)
    code, out, err = gdtest.run("ls", root, "--json", "--kernels")
    assert code == 0, err
    listing = json.loads(out)
    skipped = {s["path"]: s["reason"] for s in listing["skipped"]}
    assert os.path.join(root, "rank_1") in skipped and planted in skipped, skipped
    assert all("symbolic link" in r for r in skipped.values()), skipped
    files = [f for r in listing["ranks"] for g in r.get("graphs", [])
             for it in g.get("iterations", []) for k in it.get("kernel_list", [])
             for f in k.get("files", [])]
    assert files and planted not in files, "the linked file is not listed"
    assert not any(f.startswith(outside) for f in files), "nothing outside is listed"
    code, out, err = gdtest.run("watch", root, "--check", "nan", "--json", "-q")
    assert code == 0, f"no hit: the NaN lies outside the dump\n{out}\n{err}"
    assert "symbolic link" in err, err
    code, _, err = gdtest.run("report", root, "-o", os.path.join(scratch, "r.html"))
    assert code in (0, 1), err
    with open(os.path.join(scratch, "r.html"), encoding="utf-8") as f:
        assert outside not in f.read(), "the report embeds nothing from outside"


def test_temporary_files_go_to_tmpdir(scratch):
    a = os.path.join(scratch, "a")
    ad.write_dump(a, {0: ad.simple_net()}, stats=True)
    missing = os.path.join(scratch, "no_such_tmpdir")
    code, _, err = gdtest.run("compare", a, a, "--out", os.path.join(scratch, "c.csv"),
                              env={"TMPDIR": missing})
    assert code == 3, f"compare --out with an unusable TMPDIR fails\n{err}"
    assert missing in err, f"and names it: {err}"
    code, _, _ = gdtest.run("compare", a, a, "--out", os.path.join(scratch, "c.csv"),
                            env={"TMPDIR": scratch})
    assert code == 0, "with a usable TMPDIR it works"


def test_bisect_rounds_go_to_tmpdir(scratch):
    script = os.path.join(scratch, "train.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write("raise SystemExit('bisect ran the script: it should have stopped before')\n")
    missing = os.path.join(scratch, "no_such_tmpdir")
    code, out, err = gdtest.run("bisect", "--precision", "bf16", "--", script,
                                env={"TMPDIR": missing})
    assert code == 3, f"bisect with an unusable TMPDIR fails\n{out}\n{err}"
    assert missing in err and "($TMPDIR)" in err, f"and names it: {err}"
