"""A two-run compare of many ranks compares one rank pair at a time and writes --out's CSV and
--json's kernels as each pair finishes (docs/scale.md, "Memory and speed at scale"): what
they say of each rank must be what a compare of that rank's directories alone says, and the
contribution ranks must rank the kernels adding error over every rank. The dumps are made here:
9 ranks (more than the cores, so pairs finish out of order), tensor files, and in B of each rank
but one a kernel whose output carries an error of its own size (so the ranking interleaves the
ranks), a differing parameter on one rank and an extra kernel on another.
Run with the project's Python (.venv/bin/python; pytest, or plain: it runs pytest on itself)."""
import csv
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from analysis_dumps import simple_net, write_rank_pair

BIN = os.environ.get("GRAPHDUMP_BIN", "graphdump")
RANKS = 9
KERNELS = 6
CLEAN_RANK = 3      # no kernel adds error here
PARAM_RANK = 5      # its parameter differs
EXTRA_RANK = 7      # A has one more kernel (unpaired)


def bad_kernel(rank):
    return 1 + rank % (KERNELS - 2)


def error_size(rank):
    # distinct per rank, not in rank order
    return 0.01 * (1 + (rank * 5) % RANKS)


def make_dumps(root):
    """Writes dumps A and B under root; returns (a, b)."""
    a, b = os.path.join(root, "a"), os.path.join(root, "b")
    for rank in range(RANKS):
        kernels_a = simple_net(seed=rank, n=KERNELS)
        kernels_b = [dict(k) for k in kernels_a]
        if rank != CLEAN_RANK:
            i = bad_kernel(rank)
            y = kernels_b[i]["outputs"][0]
            noisy = (y * (1 + error_size(rank))).astype(np.float32)
            kernels_b[i] = dict(kernels_b[i], outputs=[noisy])
            # the next kernel inherits it
            kernels_b[i + 1] = dict(kernels_b[i + 1], inputs=[noisy],
                                    outputs=[(noisy * 0.9 + 0.1).astype(np.float32)])
        if rank == EXTRA_RANK:
            extra = dict(kernels_a[-1], full_name="Default/net-Net/extra-Extra/Tanh-op99")
            kernels_a = kernels_a + [extra]
        write_rank_pair(a, b, rank, kernels_a, kernels_b, 1.0 if rank == PARAM_RANK else 0.0)
    return a, b


def run(*args):
    return subprocess.run([BIN, *args, "-q"], capture_output=True, text=True)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("rank_pairs"))
    a, b = make_dumps(root)
    return root, a, b


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_csv_of_every_rank_is_that_rank_alone(dumps):
    root, a, b = dumps
    whole = os.path.join(root, "whole.csv")
    done = run("compare", a, b, "--out", whole)
    assert done.returncode == 1, done.stderr
    rows = csv_rows(whole)
    assert {r["rank"] for r in rows} == {str(r) for r in range(RANKS)}
    # ranks in order, each rank's rows together
    ranks = [int(r["rank"]) for r in rows]
    assert ranks == sorted(ranks)
    for rank in range(RANKS):
        alone = os.path.join(root, f"rank{rank}.csv")
        run("compare", os.path.join(a, f"rank_{rank}"), os.path.join(b, f"rank_{rank}"),
            "--out", alone)
        mine = [dict(r, contribution_rank=None) for r in rows if r["rank"] == str(rank)]
        theirs = [dict(r, contribution_rank=None) for r in csv_rows(alone)]
        assert mine == theirs, f"rank {rank}"
        assert len(mine) > 2 * KERNELS
    # contribution ranks: 1..N over the kernels adding error of every rank, largest added first
    adding = {}
    for r in rows:
        if r["adds_error"] == "true":
            adding[(r["rank"], r["iteration"], r["kernel_a"])] = (
                float(r["added_error"]), int(r["contribution_rank"]))
    assert len(adding) == 2 * (RANKS - 1)
    ranked = sorted(adding.values(), key=lambda v: v[1])
    assert [v[1] for v in ranked] == list(range(1, len(adding) + 1))
    added = [v[0] for v in ranked]
    assert added == sorted(added, reverse=True)
    assert all(r["contribution_rank"] == "0" for r in rows if r["adds_error"] == "false")


def test_json_of_every_rank_is_that_rank_alone(dumps):
    root, a, b = dumps
    done = run("compare", a, b, "--json")
    whole = json.loads(done.stdout)
    assert whole["summary"]["kernels"] == len(whole["kernels"])
    first = whole["first_adding_error"]
    assert first["rank"] == 0 and first["kernel"].endswith(f"-op{bad_kernel(0)}")
    assert [c["contribution_rank"] for c in whole["contributors"]] == list(
        range(1, 2 * (RANKS - 1) + 1))
    assert [s["rank"] for s in whole["differing_sources"]] == [PARAM_RANK, PARAM_RANK]
    assert [(u["rank"], u["side"]) for u in whole["unpaired"]] == [(EXTRA_RANK, "A")] * 2
    for rank in range(RANKS):
        alone = json.loads(run("compare", os.path.join(a, f"rank_{rank}"),
                               os.path.join(b, f"rank_{rank}"), "--json").stdout)
        strip = lambda ks: [dict(k, contribution_rank=None) for k in ks]
        mine = strip(k for k in whole["kernels"] if k["rank"] == rank)
        assert mine == strip(alone["kernels"]), f"rank {rank}"
        by_name = {(k["iteration"], k["kernel_a"]): k["contribution_rank"]
                   for k in whole["kernels"] if k["rank"] == rank}
        for c in whole["contributors"]:
            if c["rank"] == rank:
                assert by_name[(c["iteration"], c["kernel"])] == c["contribution_rank"]


def test_text_names_the_first_divergence_and_the_counts(dumps):
    root, a, b = dumps
    text = run("compare", a, b).stdout
    paired = RANKS * 2 * (KERNELS + 1)  # each kernel and the parameter, two iterations
    assert f"kernels: {paired} paired" in text
    assert f"-op{bad_kernel(0)} (rank 0, graph 0, iteration 0)" in text
    assert f"  ... {2 * (RANKS - 1)} in all (see --json contributors)" in text


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
