"""Statistics reduced on graphdump's worker thread (docs/python.md): the training thread queues
each tensor and goes on; an operator that writes a queued tensor in place waits until it has
been read. The rows must be those of the bytes the kernel saw, exactly as if every row were
computed from the files a full dump writes. GRAPHDUMP_TEST_STATISTICS_DELAY_US makes the worker
fall behind, so that every in-place write of user_inplace.py meets a tensor still queued, and
every buffer compiled_inplace.py's generated kernels rewrite is still queued when they do."""
import csv
import glob
import os

import numpy as np

from conftest import HERE, graphdump, python, write_config

SCRIPT = os.path.join(HERE, "user_inplace.py")
COMPILED = os.path.join(HERE, "compiled_inplace.py")
RESIZE = os.path.join(HERE, "storage_resize.py")
CATEGORIES = ["max", "min", "avg", "l2norm", "nan count", "negative zero count"]


def uninitialized(row):
    """A row of memory nothing wrote: the DataLoader's seed, `torch.empty((), dtype=int64)`
    filled by `random_` (its values differ from run to run)."""
    return row[0] == "empty" or (row[0] == "random_" and row[4] == "input")


def rows(root):
    """{iteration dir: [row without its timestamp]} of every statistic.csv under `root`."""
    out = {}
    for path in sorted(glob.glob(os.path.join(str(root), "**", "statistic.csv"),
                                 recursive=True)):
        with open(path) as f:
            table = list(csv.reader(f))
        out[os.path.relpath(os.path.dirname(path), str(root))] = [
            r[:4] + r[5:] if not uninitialized(r[:4] + r[5:]) else r[:4] for r in table[1:]]
    return out


def dump(tmp_path, name, saved, env=None, script=SCRIPT):
    config = write_config(tmp_path / f"{name}.json", tmp_path / name,
                          {"saved_data": saved, "statistic_category": CATEGORIES})
    run = graphdump("python", "--config", config, script, tmp_path / f"{name}.npz", env=env,
                    check=0)
    return run, tmp_path / name / "rank_0"


def test_queued_statistics_equal_those_computed_from_the_files(tmp_path):
    python(SCRIPT, tmp_path / "plain.npz", check=0)
    behind = {"GRAPHDUMP_TEST_STATISTICS_DELAY_US": "3000", "GRAPHDUMP_STATISTICS_THREAD": "1"}
    _, queued = dump(tmp_path, "queued", "statistic", behind)
    _, on_thread = dump(tmp_path, "sync", "statistic", {"GRAPHDUMP_STATISTICS_THREAD": "0"})
    _, full = dump(tmp_path, "full", "full")

    # The training is the plain one, bit for bit, and runs the same: the queued gradients are
    # taken over as .grad without a copy, as in the plain run (their rows, equal below, are
    # those of the bytes before the second micro-batch added to them).
    plain = np.load(tmp_path / "plain.npz")
    assert int(plain["taken_over"]) == 6, "the plain run takes over all 6 gradients"
    for name in ("queued", "sync", "full"):
        taken = int(np.load(tmp_path / f"{name}.npz")["taken_over"])
        assert taken == 6, f"{name}: {taken} of 6 gradients taken over without a copy"
    for name in ("queued", "sync", "full"):
        trained = np.load(tmp_path / f"{name}.npz")
        assert sorted(trained.files) == sorted(plain.files)
        for key in plain.files:
            assert np.array_equal(trained[key], plain[key]), (name, key)

    expected = rows(full)
    assert sorted(expected) == [f"Net/0/{i}" for i in range(3)]
    for name, got in (("queued", rows(queued)), ("sync", rows(on_thread))):
        assert sorted(got) == sorted(expected), name
        for it, want in expected.items():
            assert len(got[it]) == len(want) > 100, (name, it)
            bad = [(a, b) for a, b in zip(got[it], want) if a != b]
            assert not bad, f"{name} {it}: {len(bad)} rows differ, first: {bad[:2]}"

    # The in-place kernels' inputs are the bytes before their write: NumPy on the full dump's
    # files gives the values of the rows (equal above), found by their timestamps.
    with open(full / "Net" / "0" / "1" / "statistic.csv") as f:
        table = list(csv.reader(f))[1:]
    for op in ("mul_", "relu_", "add_", "batch_norm", "_foreach_mul_", "AdamW"):
        inputs = [r for r in table if r[0] == op and r[5] == "input"]
        assert inputs, f"no input rows of {op}"
        for r in inputs:
            name = f"{r[0]}.{r[1]}.{r[2]}.{r[3]}.{r[4]}.input.{r[6]}.*.npy"
            files = glob.glob(str(full / "Net" / "0" / "1" / name))
            assert len(files) == 1, (name, files)
            data = np.load(files[0]).astype(np.float64)
            # statistic.csv keeps 6 significant digits
            assert np.isclose(float(r[10]), data.max(), rtol=1e-5, atol=0), (op, r)
            assert np.isclose(float(r[11]), data.min(), rtol=1e-5, atol=0), (op, r)

    # Statistics the last step took are reused only for bytes nothing wrote since: fc1's weights,
    # clamped through `.data` between steps (their version unchanged), are read again.
    for it in (1, 2):
        with open(full / "Net" / "0" / str(it) / "statistic.csv") as f:
            params = [r for r in list(csv.reader(f))[1:] if r[0] == "Parameter"]
        assert {"fc1_weight", "fc1_bias", "fc2_weight"} <= {r[1] for r in params}, it
        for r in params:
            files = glob.glob(str(full / "Net" / "0" / str(it) / f"Parameter.{r[1]}.*.npy"))
            assert len(files) == 1, (r[1], files)
            data = np.load(files[0]).astype(np.float64)
            if r[1] == "fc1_weight":  # clamped: the bound is reached
                assert np.abs(data).max() == np.float32(0.15), (it, r[1])
            assert np.isclose(float(r[10]), data.max(), rtol=1e-5, atol=0), (it, r)
            assert np.isclose(float(r[11]), data.min(), rtol=1e-5, atol=0), (it, r)


def test_compiled_kernels_rewriting_queued_buffers_wait_for_them(tmp_path):
    """Inductor's kernels write buffers behind PyTorch's dispatcher: each reports what it
    writes before it runs, and the rows are a full dump's (fails when they do not)."""
    behind = {"GRAPHDUMP_TEST_STATISTICS_DELAY_US": "3000", "GRAPHDUMP_STATISTICS_THREAD": "1"}
    _, queued = dump(tmp_path, "queued", "statistic", behind, script=COMPILED)
    _, full = dump(tmp_path, "full", "full", script=COMPILED)
    plain = np.load(tmp_path / "full.npz")
    trained = np.load(tmp_path / "queued.npz")
    for key in plain.files:
        assert np.array_equal(trained[key], plain[key]), key
    got, expected = rows(queued), rows(full)
    assert sorted(got) == sorted(expected)
    compiled = [it for it in expected if not it.startswith("Net/0/")]
    assert len(compiled) >= 4, sorted(expected)  # forward and backward graphs, 2 iterations
    for it, want in expected.items():
        assert len(got[it]) == len(want), it
        bad = [(a, b) for a, b in zip(got[it], want) if a != b]
        assert not bad, f"{it}: {len(bad)} rows differ, first: {bad[:2]}"


def test_bytes_freed_behind_operators_are_read_first(tmp_path):
    # FSDP frees a parameter's memory with UntypedStorage.resize_, which no operator reports:
    # the statistics still queued for those bytes are read before they are freed.
    behind = {"GRAPHDUMP_TEST_STATISTICS_DELAY_US": "3000", "GRAPHDUMP_STATISTICS_THREAD": "1"}
    _, queued = dump(tmp_path, "resize", "statistic", behind, script=RESIZE)
    values = np.load(tmp_path / "resize.npz")
    for it in range(2):
        with open(queued / "Net" / "0" / str(it) / "statistic.csv") as f:
            outputs = [r for r in list(csv.reader(f))[1:] if r[0] == "mul" and r[5] == "output"]
        assert len(outputs) == 1, (it, outputs)
        got = (float(outputs[0][10]), float(outputs[0][11]))
        want = (values["max"][it], values["min"][it])
        assert np.allclose(got, want, rtol=1e-5, atol=0), \
            f"iteration {it}: the freed output's max and min read {got}, its values {want}"
