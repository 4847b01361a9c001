"""A rank killed mid-run (SIGKILL in step 1, after its backward kernels were handed to the
asynchronous writers and before the all-reduce): the launcher names the rank and the signal,
exits non-zero, stops the other rank, and every .npy left under a final name in either rank's
dump loads with numpy with the shape its header announces (no truncated file).
Also: ranks that exit with an error (a batch of 7 rows cannot be split over 2 ranks) are
reported with their exit status."""
import os
import subprocess

import numpy as np

import gdtest


def test_killed_rank_and_failing_rank_are_named(scratch):
    subprocess.run([gdtest.PYTHON,
                    os.path.join(gdtest.SOURCE_DIR, "examples", "make_models.py"), scratch,
                    "small_cnn"], check=True, capture_output=True)
    model = os.path.join(scratch, "small_cnn.pt")
    dump = os.path.join(scratch, "dump")
    config = gdtest.write_config(os.path.join(scratch, "dump.json"), dump,
                                 {"support_device": [0, 1], "saved_data": "full"},
                                 {"enable": False})
    code, out, err = gdtest.run(
        "train", model, "--steps", 3, "--input-shape", "8x3x16x16", "--classes", 5,
        "--config", config, "--nproc", 2,
        env={"GRAPHDUMP_TEST_KILL_RANK": "1", "GRAPHDUMP_TEST_KILL_STEP": "1",
             "GRAPHDUMP_DIST_TIMEOUT": "60"})
    assert code != 0, f"the job fails when a rank is killed (exit {code})"
    assert "rank 1 failed: killed by signal 9 (SIGKILL)" in err, \
        f"the launcher names the rank and the signal:\n{err}"
    for rank in ("rank_0", "rank_1"):
        assert os.path.isdir(os.path.join(dump, rank, "Net", "0", "0")), \
            f"{rank} dumped step 0 before the kill"
    npys = gdtest.files(os.path.join(dump, "**", "*.npy"))
    assert len(npys) > 50, f"files were dumped before the kill: {len(npys)}"
    bad = []
    for path in npys:
        try:
            a = np.load(path)
            with open(path, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
            if size < a.nbytes:
                bad.append(path)
        except Exception as e:  # noqa: BLE001: any failure to load is what we look for
            bad.append(f"{path}: {e}")
    assert bad == [], "truncated or unreadable .npy files under final names"
    # The killed rank's writers may have lost queued files (asynchronous mode), never
    # half-written ones; it did write some of step 0.
    rank1 = gdtest.files(os.path.join(dump, "rank_1", "**", "*.npy"))
    assert len(rank1) > 0, "rank 1 wrote files before it was killed"

    # A rank that fails with an error exit code is named with its status.
    code, out, err = gdtest.run("train", model, "--steps", 1, "--input-shape", "7x3x16x16",
                                "--classes", 5, "--nproc", 2)
    assert code == 2, f"uneven shards are a usage error (exit {code})\n{err}"
    assert "cannot be split evenly over 2 ranks" in err, f"the rank says why:\n{err}"
    assert "failed: exited with status 2" in err, f"the launcher names the status:\n{err}"
