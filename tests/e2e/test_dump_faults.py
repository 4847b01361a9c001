"""Faults during a dump (docs/reliability.md): kill -9 and SIGTERM at random moments of an
asynchronous dump, a disk that fills up mid-run (a small tmpfs), two runs into one path, and
symbolic links planted in the dump path. Every file under a final name must load, no
statistic.csv row may be torn, and nothing may be written outside the dump path."""
import csv
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

import gdmodels
import gdtest as t

MODEL = gdmodels.model_path("small_cnn")
TRAIN = ["train", MODEL, "--input-shape", "4x3x16x16", "--classes", "5"]
ENV = dict(os.environ, **gdmodels.env_one_thread())
for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"):
    ENV.pop(key, None)
RNG = random.Random(20261124)


def config(work, name, dump, asynchronous=True, saved="full"):
    path = os.path.join(work, name + ".json")
    t.write_config(path, dump, {"saved_data": saved, "support_device": [0, 1]},
                   {"enable": not asynchronous})
    return path


def temporaries(dump):
    return [f for f in glob.glob(os.path.join(dump, "**", ".*"), recursive=True) if ".tmp." in f]


def check_dump(dump, what, allow_temporaries=False):
    """Every .npy under a final name loads and holds what its header says; every statistic.csv
    row is whole. Returns the number of .npy files."""
    files = [f for f in glob.glob(os.path.join(dump, "**", "*.npy"), recursive=True)
             if not os.path.basename(f).startswith(".")]
    bad = []
    for f in files:
        try:
            a = np.load(f)
            if a.nbytes + 64 > os.path.getsize(f) + 64 * 1024:  # header at most 64 KiB
                bad.append(f"{f}: {a.nbytes} bytes of data in a smaller file")
        except Exception as e:  # noqa: BLE001  (any failure to load is the finding)
            bad.append(f"{f}: {e}")
    assert not bad, f"{what}: every .npy under a final name loads: {bad[:3]}"
    for table in glob.glob(os.path.join(dump, "**", "statistic.csv"), recursive=True):
        with open(table, newline="") as f:
            text = f.read()
        rows = list(csv.reader(text.splitlines()))
        assert text.endswith("\n"), f"{what}: {table} ends with a whole line"
        torn = [r for r in rows[1:] if len(r) != len(rows[0]) + 1 or r[-1] != ""]
        assert not torn, f"{what}: no torn row in {table}: {torn[:2]}"
    if not allow_temporaries:
        assert temporaries(dump) == [], f"{what}: no temporary is left"
    return len(files)


def incomplete(dump):
    path = os.path.join(dump, "rank_0", ".dump_metadata", "INCOMPLETE")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def start(cfg, steps, *extra):
    return subprocess.Popen([t.BIN, *TRAIN, "--config", cfg, "--steps", str(steps), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def wait_for_files(dump, proc, at_least=1, limit=60):
    """Waits until the dump holds a tensor file (the run is dumping), then a random moment."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if glob.glob(os.path.join(dump, "rank_0", "Net", "0", "*", "*.npy")):
            break
        time.sleep(0.01)
    time.sleep(RNG.uniform(0.0, 0.8))


def test_kill_and_terminate(scratch):
    """kill -9 (10 times), then SIGTERM and SIGINT, at random moments of an asynchronous dump."""
    for i, sig in enumerate([signal.SIGKILL] * 10 + [signal.SIGTERM] * 4 + [signal.SIGINT]):
        dump = os.path.join(scratch, f"dump{i}")
        proc = start(config(scratch, f"c{i}", dump), 400)
        wait_for_files(dump, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        name = signal.Signals(sig).name
        assert proc.returncode == -sig, f"run {i} died of {name}"
        n = check_dump(dump, f"{name} run {i}", allow_temporaries=sig == signal.SIGKILL)
        assert n > 0, f"{name} run {i} had written files"
        marker = incomplete(dump)
        assert marker is not None and "This dump is incomplete" in marker, \
            f"{name} run {i}: .dump_metadata/INCOMPLETE says the dump is incomplete"
        shutil.rmtree(dump, ignore_errors=True)
    # A two-rank job: the launcher forwards SIGTERM and waits, so no rank leaves temporaries.
    dump = os.path.join(scratch, "ranks")
    proc = start(config(scratch, "ranks", dump), 400, "--nproc", "2")
    wait_for_files(dump, proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, "the launcher died of SIGTERM"
    check_dump(dump, "SIGTERM to a two-rank job")


@pytest.mark.parametrize("asynchronous", [True, False])
def test_full_disk(scratch, asynchronous):
    """A 6 MiB disk fills during the dump: training goes on, one error, INCOMPLETE names the
    file, nothing torn, no temporary left."""
    mode = "asynchronous" if asynchronous else "synchronous"
    cfg = config(scratch, "c", os.path.join(scratch, "disk", "dump"), asynchronous)
    command = " ".join([t.BIN, *TRAIN, "--config", cfg, "--steps", "60",
                        f">{scratch}/out 2>{scratch}/err"])
    p = t.in_small_tmpfs(scratch, "6m", command, ENV)
    if p is None:
        pytest.skip("no tmpfs in a user namespace here")
    with open(os.path.join(scratch, "out")) as f:
        out = f.read()
    with open(os.path.join(scratch, "err")) as f:
        err = f.read()
    assert p.returncode == 3, f"{mode}: exit 3, the dump is incomplete: {err[-500:]}"
    assert "step 60/60" in out, f"{mode}: training ran every step: {out[-300:]}"
    stopped = [line for line in err.splitlines() if "dumping stopped" in line]
    assert len(stopped) == 1, f"{mode}: one error, not one per tensor: {err[-800:]}"
    assert stopped and "No space left on device" in stopped[0], \
        f"{mode}: the error says why: {stopped}"
    dump = os.path.join(scratch, "copy", "dump")
    marker = incomplete(dump) or ""
    assert "No space left on device" in marker and dump.replace("copy", "disk") in marker, \
        f"{mode}: INCOMPLETE names the file and the cause: {marker!r}"
    check_dump(dump, f"{mode} full disk")


def test_two_runs_into_one_path(scratch):
    """Two runs into one dump path at once: exactly one gets the directory, the other is
    refused before it writes, and each file is whole (docs/reliability.md)."""
    dump = os.path.join(scratch, "dump")
    cfg = config(scratch, "c", dump)
    procs = [start(cfg, 20) for _ in range(2)]
    results = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        results.append((p.returncode, err))
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], f"one run dumps, the other is refused: {results}"
    refused = [err for code, err in results if code == 2]
    # The later one finds the directory there, or its lock held by the other run.
    assert refused and ("already exists" in refused[0] or
                        "is being written by another run now" in refused[0]), \
        f"the refusal says why: {refused}"
    n = check_dump(dump, "two runs into one path")
    assert n > 0, "the runs wrote files"
    for order in glob.glob(os.path.join(dump, "rank_0", "execution_order", "*global*")):
        with open(order) as f:
            lines = f.read().splitlines()
        assert all(line.isdigit() for line in lines), f"{order}: whole lines: {lines[:5]}"
    code, out, err = t.run("ls", dump, "--json")
    assert code == 0 and json.loads(out)["ranks"], f"ls reads the directory: {err[-300:]}"


def test_planted_links(scratch):
    """Symbolic links planted in the dump path lead outside: nothing is written through them."""
    outside = os.path.join(scratch, "outside")
    os.makedirs(outside)
    victim = os.path.join(outside, "victim.csv")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.chmod(victim, 0o644)

    def outside_untouched(what):
        assert sorted(os.listdir(outside)) == ["victim.csv"], f"{what}: nothing new outside"
        with open(victim) as f:
            assert f.read() == "precious\n", f"{what}: the outside file's content"
        assert os.stat(victim).st_mode & 0o777 == 0o644, f"{what}: the outside file's mode"

    cases = {
        "the dump path": ("", outside),
        "rank_0": ("rank_0", outside),
        ".dump_metadata": ("rank_0/.dump_metadata", outside),
        "the net directory": ("rank_0/Net", outside),
        "statistic.csv": ("rank_0/Net/0/0/statistic.csv", victim),
        "the execution order": ("rank_0/execution_order/ms_global_execution_order_graph_0.csv",
                                victim),
    }
    for what, (relative, target) in cases.items():
        dump = os.path.join(scratch, "dump_" + what.replace(" ", "_").replace(".", ""))
        link = os.path.join(dump, relative) if relative else dump
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(target, link)
        cfg = config(scratch, "c", dump, asynchronous=False)
        code, out, err = t.run(*TRAIN, "--config", cfg, "--steps", "2", env=ENV)
        if "/" in relative:
            # rank_0 exists, so the run is refused before it writes anything (one run per
            # directory); links planted while a run writes are the session tests' case.
            assert code == 2 and f"{dump}/rank_0 already exists" in err, \
                f"{what}: an existing rank_0 is refused: {code} {err[-300:]}"
        else:
            # A dump path that cannot be prepared stops the dump, not the training.
            assert code == 0 and "step 2/2" in out, \
                f"{what}: the training runs every step: {code} {out} {err[-300:]}"
            warnings = [line for line in err.splitlines()
                        if "warning: dumping is off for this run" in line]
            assert len(warnings) == 1 and (f"{link} is a symbolic link" in warnings[0] or
                                           f"{link}: it is a symbolic link" in warnings[0]), \
                f"{what}: one warning naming the link: {err}"
        outside_untouched(what)
        assert os.path.islink(link) or relative.endswith(".csv"), \
            f"{what}: the link itself is left alone"

