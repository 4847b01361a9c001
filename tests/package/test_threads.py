"""Threads (docs/reliability.md, "Threads"): a script whose worker threads train their own
models (forward, backward(), optimizer.step()) while the main thread trains under
`graphdump python` runs exactly as plain python, and its dump holds the main thread's training
only, consistent: every statistic row's file exists and loads."""
import csv
import glob
import os

import numpy as np
import pytest

from conftest import HERE, execution_order, graphdump, python, write_config

SCRIPT = os.path.join(HERE, "user_threads.py")
STEPS = 50
RUNS = 2  # per mode; each run overlaps the three loops for STEPS steps


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain") / "plain.npz"
    python(SCRIPT, out, "--steps", STEPS, check=0)
    return np.load(out)


MODES = {
    "sync": ({"saved_data": "full"}, None),
    "async": ({"saved_data": "full"}, {"enable": False}),
    "statistic": ({"saved_data": "statistic"}, None),
}


def _statistic_rows(step_dir):
    with open(os.path.join(step_dir, "statistic.csv"), newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_worker_threads_training_their_own_models(tmp_path, plain, mode):
    common, e2e = MODES[mode]
    for run in range(RUNS):
        dump = tmp_path / f"dump{run}"
        config = write_config(tmp_path / f"d{run}.json", dump, common, e2e)
        out = tmp_path / f"dumped{run}.npz"
        p = graphdump("python", "--config", config, SCRIPT, out, "--steps", STEPS, timeout=120)
        assert p.returncode == 0, (run, p.stderr[-3000:])
        dumped = np.load(out)
        assert sorted(dumped.files) == sorted(plain.files) and len(plain.files) == 12
        for key in plain.files:
            assert np.array_equal(plain[key], dumped[key]), (run, key)
        rank = dump / "rank_0"
        # Only the main thread's training is dumped: its one model, its Adam, one iteration per
        # step of its own.
        order = execution_order(rank)
        assert "Default/0-Linear/linear-op0" in order, order[:5]
        updates = [k for k in order if k.startswith("Default/optimizer-")]
        assert {k.split("/")[1] for k in updates} == {"optimizer-Adam"}, updates
        assert len(updates) == 4, updates  # one per parameter of the main thread's model
        steps = sorted(int(d) for d in os.listdir(rank / "Net" / "0") if d.isdigit())
        assert steps == list(range(STEPS)), steps
        for step in steps:
            step_dir = rank / "Net" / "0" / str(step)
            rows = _statistic_rows(step_dir)
            assert rows, step
            names = {r["Op Name"] for r in rows}
            assert not any("SGD" in n or "AdamW" in n for n in names), names
            if mode == "statistic":
                assert not glob.glob(f"{step_dir}/*.npy")
                continue
            # Every row names a file that exists and loads, and every file has its row.
            files = set(os.path.basename(f) for f in glob.glob(f"{step_dir}/*.npy"))
            for r in rows:
                prefix = (f"{r['Op Type']}.{r['Op Name']}.{r['Task ID']}.{r['Stream ID']}."
                          f"{r['Timestamp']}.{r['IO']}.{r['Slot']}.")
                named = [f for f in files if f.startswith(prefix)]
                assert len(named) == 1, (step, prefix)
                np.load(step_dir / named[0])
            assert len(files) == len(rows), step
