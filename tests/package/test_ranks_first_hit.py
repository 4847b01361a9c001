"""A dump replicated to 8 ranks, made here with NumPy: rank 5 makes the first NaN at kernel 2 and
an AllReduce spreads it to every rank one kernel later. watch's list, --json, graphdump.watch and
report all name rank 5's kernel 2 as the first hit, although rank 5's clock runs a second ahead of
the others' (so by timestamps rank 0's AllReduce would look first); every hit line names its rank
and the hits are listed in the order they occurred across ranks (docs/analysis.md, watch). And
compare --ranks on a statistics-only dump says which statistic differs and by how much."""
import json
import os
import pty
import re
import subprocess

import numpy as np
import pytest

import analysis_dumps as d
import graphdump
from conftest import BIN, clean_env
from conftest import graphdump as cli

RANKS = 8
BAD_RANK = 5
SCOPE = "Default/net-Net"
NAMES = [f"{SCOPE}/layer0-Layer/MatMul-op0", f"{SCOPE}/layer1-Layer/Add-op1",
         f"{SCOPE}/layer2-Layer/Mul-op2", f"{SCOPE}/allreduce-DataParallel/AllReduce-op3",
         f"{SCOPE}/layer4-Layer/Tanh-op4", f"{SCOPE}/layer5-Layer/Sub-op5"]


def kernels(rank, iteration, bad):
    """The chain of NAMES on rank `rank`: with `bad`, rank BAD_RANK's kernel 2 makes a NaN in
    row 1 and the AllReduce (kernel 3) brings it to every rank."""
    rng = np.random.default_rng(iteration)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    out = []
    for i, name in enumerate(NAMES):
        y = (x * 0.9 + 0.1).astype(np.float32)
        if bad and ((i == 2 and rank == BAD_RANK) or i == 3):
            y[1, 3] = np.nan
        out.append({"full_name": name, "inputs": [x], "outputs": [y],
                    "source": ("/home/user/project/model.py", 10 + i, f"x = layer{i}(x)")})
        x = y
    return out


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks") / "dump"
    for rank in range(RANKS):
        # Rank 5 runs on a machine whose clock is one second ahead.
        clock = 1700000000000000 + (1000000 if rank == BAD_RANK else 0)
        d.write_dump(str(root), {0: kernels(rank, 0, False), 1: kernels(rank, 1, True)},
                     rank=rank, clock=clock)
    return root


def short(kernel):
    return kernel.rsplit("/", 1)[-1]


def test_watch_lists_hits_in_order_across_ranks(dump):
    p = cli("watch", dump, "--check", "nan", "--limit", "0", "-q")
    assert p.returncode == 1, p.stdout + p.stderr
    lines = [l for l in p.stdout.splitlines() if re.match(r"^  (->|  ) ", l)]
    # Every hit line names its rank; the marked one is rank 5's Mul, the dump's first NaN.
    assert lines[0].startswith(f"  -> rank {BAD_RANK} it 1 {NAMES[2]} output 0: [nan] 1 NaN"), \
        p.stdout
    parsed = [re.match(r"^  (?:->|  ) rank (\d+) it (\d+) (\S+) (input|output) (\d+): ", l)
              for l in lines]
    assert all(parsed), lines
    hits = [(int(m[1]), m[3], m[4]) for m in parsed]
    # Rank 5's Mul output and the AllReduce's input on rank 5, then the AllReduce outputs of
    # every rank (ranks ascending), then what followed on each rank.
    assert hits[:2] == [(BAD_RANK, NAMES[2], "output"), (BAD_RANK, NAMES[3], "input")], hits
    assert hits[2:2 + RANKS] == [(r, NAMES[3], "output") for r in range(RANKS)], hits
    position = {name: i for i, name in enumerate(NAMES)}
    steps = [(position[k], io == "output") for _, k, io in hits]
    assert steps == sorted(steps), hits  # in the order they occurred
    assert len(hits) == 2 + RANKS + RANKS * 2 * 2  # Tanh and Sub, input and output, every rank
    assert f"first rank to hit: rank {BAD_RANK}; first hit: {NAMES[2]} (rank {BAD_RANK}" in \
        p.stdout
    per_rank = p.stdout[p.stdout.index("first hit per rank"):].splitlines()
    assert per_rank[1].startswith(f"  rank {BAD_RANK}: it 1 #2 {NAMES[2]}"), per_rank

    result = json.loads(cli("watch", dump, "--check", "nan", "--json", "-q").stdout)
    first = result["first_hit"]
    assert (first["rank"], first["kernel"], first["io"], first["first_index"]) == \
        (BAD_RANK, NAMES[2], "output", [1, 3])
    assert first == result["hits"][0] == result["first_hit_per_rank"][0]
    assert result["first_rank"] == BAD_RANK
    assert [(h["rank"], h["kernel"], h["io"]) for h in result["hits"]] == hits

    frame = graphdump.watch(dump, "nan")
    assert list(zip(frame["rank"], frame.kernel, frame.io)) == hits
    assert frame.first_index[0] == (1, 3) and frame.row[0] == 1


def test_report_names_and_highlights_the_first_rank(dump, tmp_path):
    out = tmp_path / "report.html"
    p = cli("report", dump, "-o", out)
    assert p.returncode == 0, p.stdout + p.stderr
    html = out.read_text()
    summary = re.search(r'<li class="first-hit-text">(.*?)</li>', html).group(1)
    assert f"<code>{NAMES[2]}</code> output 0 (rank {BAD_RANK}, graph 0, iteration 1)" in \
        summary, summary
    first_row = re.search(r'<tr class="first-hit">(.*?)</tr>', html).group(1)
    assert first_row.startswith(f"<td>{BAD_RANK}</td><td>0</td><td>1</td><td><code>{NAMES[2]}"), \
        first_row
    # The charts look at rank 5's iteration 1, where the first hit is marked.
    assert f"Statistics along the execution order (rank {BAD_RANK}, iteration 1)" in html
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                                html, re.S).group(1).replace("\\u003c", "<"))
    marked = [(c["points"][m["index"]]["name"], m["label"]) for c in data["charts"]
              for m in c["markers"] if m["class"] == "first-hit"]
    assert marked and all(name == NAMES[2] for name, _ in marked), marked


@pytest.fixture(scope="module")
def statistics_dump(tmp_path_factory):
    """Statistics only, 4 ranks: rank 2's AllReduce output has a max 0.001 above the others'."""
    root = tmp_path_factory.mktemp("ranks_stats") / "dump"
    for rank in range(4):
        chain = kernels(rank, 0, False)
        y = np.linspace(-1.5, 1.5, 32, dtype=np.float32).reshape(4, 8)
        if rank == 2:
            y[3, 7] = np.float32(1.501)
        chain[3]["outputs"] = [y]
        d.write_dump(str(root), {0: chain}, rank=rank, files=False, stats=True)
    return root


def test_compare_ranks_says_which_statistic_differs_and_by_how_much(statistics_dump):
    p = cli("compare", statistics_dump, "--ranks", "-q")
    assert p.returncode == 1, p.stdout + p.stderr
    assert (f"first disagreement: iteration 0, {NAMES[3]} (graph 0), rank 2 vs rank 0, "
            "Max Value 1.501 vs 1.5 (by 0.001; output 0, statistics only) at "
            "/home/user/project/model.py:13") in p.stdout, p.stdout
    assert "max abs err" not in p.stdout
    result = json.loads(cli("compare", statistics_dump, "--ranks", "-q", "--json").stdout)
    first = result["first_disagreement"]
    assert (first["rank"], first["reference_rank"], first["kernel"], first["io"], first["slot"],
            first["statistic"]) == (2, 0, NAMES[3], "output", 0, "Max Value")
    assert first["value"] == pytest.approx(1.501) and first["reference_value"] == 1.5
    assert first["abs_diff"] == pytest.approx(0.001, rel=1e-6)


def run_on_terminal(*args):
    """Runs the CLI with stderr on a pseudo-terminal; returns (exit status, what stderr showed)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.DEVNULL, stderr=slave,
                         env=clean_env())
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return p.wait(timeout=300), shown.decode()


def test_progress_lines_on_a_terminal_only(dump):
    rc, shown = run_on_terminal("watch", dump, "--check", "nan")
    assert rc == 1
    # Counts and rate of each step: the ranks indexed, then the tensors checked (2 iterations
    # of 6 kernels, an input and an output each, on every rank).
    assert re.search(rf"indexing ranks \[#+\] {RANKS}/{RANKS}, [0-9.]+[kM]?/s", shown), shown
    tensors = RANKS * 2 * 6 * 2
    assert re.search(rf"watch: tensors \[#+\] {tensors}/{tensors}, [0-9.]+[kM]?/s", shown), shown
    rc, shown = run_on_terminal("compare", dump, "--ranks")
    assert re.search(rf"compare --ranks: ranks \[#+\] {RANKS - 1}/{RANKS - 1}, ", shown), shown
    assert shown.count("compare: tensor pairs") == 0  # one line over the ranks, not one per rank
    # -q, and stderr not a terminal: nothing drawn.
    assert "indexing" not in run_on_terminal("watch", dump, "--check", "nan", "-q")[1]
    p = cli("watch", dump, "--check", "nan")
    assert "indexing" not in p.stderr and "watch: tensors" not in p.stderr
