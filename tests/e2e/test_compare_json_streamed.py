"""`graphdump compare A B --json` spills each rank pair's comparison to temporary files and merges
them while it writes (docs/scale.md, "Memory and speed at scale"): the document must say what
the whole comparison says. Each rank pair's kernels, sources, graph inputs and unpaired kernels
are what comparing that pair alone says, in rank order; the contribution ranks, the contributors
and the first failure are over every rank (the largest added error first, ties in execution
order); --out beside --json writes the CSV the text's --out writes. The dumps are made here: 8
ranks of a 6-kernel net, two iterations; ranks 0 and 1 agree, ranks 2 and 4 (the same data)
carry the same error in kernel 1, rank 3 a larger one in kernel 2, rank 7 a smaller one in kernel
3 and an extra kernel in A; rank 5's parameter differs and rank 6's graph input.
Run with the project's Python (.venv/bin/python; pytest, or plain: it runs pytest on itself)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from analysis_dumps import simple_net, write_rank_pair

BIN = os.environ.get("GRAPHDUMP_BIN", "graphdump")
RANKS = 8
KERNELS = 6
ERRORS = {2: (1, 0.02), 3: (2, 0.05), 4: (1, 0.02), 7: (3, 0.01)}  # rank: (kernel, size)
PARAM_RANK, INPUT_RANK, EXTRA_RANK = 5, 6, 7


def seed(rank):
    return 2 if rank == 4 else rank  # ranks 2 and 4 hold the same data: their errors tie


@pytest.fixture(scope="module")
def dumps(module_scratch):
    a, b = os.path.join(module_scratch, "a"), os.path.join(module_scratch, "b")
    planted = {}
    for rank in range(RANKS):
        kernels_a = simple_net(seed=seed(rank), n=KERNELS)
        kernels_b = [dict(k) for k in kernels_a]
        if rank in ERRORS:
            i, size = ERRORS[rank]
            y = kernels_b[i]["outputs"][0]
            noisy = (y * (1 + size)).astype(np.float32)
            diff = noisy.astype(np.float64) - y
            planted[rank] = (float(np.abs(diff).max()),
                             float(np.linalg.norm(diff) / np.linalg.norm(noisy.astype(np.float64))))
            kernels_b[i] = dict(kernels_b[i], outputs=[noisy])
            kernels_b[i + 1] = dict(kernels_b[i + 1], inputs=[noisy],
                                    outputs=[(noisy * 0.9 + 0.1).astype(np.float32)])
        if rank == INPUT_RANK:
            x = kernels_b[0]["inputs"][0]
            kernels_b[0] = dict(kernels_b[0], inputs=[(x * 1.05).astype(np.float32)])
        if rank == EXTRA_RANK:
            kernels_a = kernels_a + [dict(kernels_a[-1],
                                          full_name="Default/net-Net/extra-Extra/Tanh-op99")]
        write_rank_pair(a, b, rank, kernels_a, kernels_b, 1.0 if rank == PARAM_RANK else 0.0)
    return a, b, planted


def compare(*args, env=None, binary=BIN):
    p = subprocess.run([binary, "compare", *args, "-q"], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    assert p.returncode in (0, 1), p.stderr
    return p


def unranked(items):
    return [dict(k, contribution_rank=None) for k in items]


def test_json_is_every_rank_pair_alone_ranked_over_all(dumps):
    a, b, planted = dumps
    whole = json.loads(compare(a, b, "--json").stdout)
    alone = {r: json.loads(compare(os.path.join(a, f"rank_{r}"), os.path.join(b, f"rank_{r}"),
                                   "--json").stdout) for r in range(RANKS)}
    # Every array of records: the rank pairs' own, one pair after the other.
    for key in ("kernels", "differing_sources", "differing_graph_inputs", "unpaired",
                "call_count_differences"):
        expected = [x for r in range(RANKS) for x in alone[r][key]]
        assert unranked(whole[key]) == unranked(expected), key
    assert [s["rank"] for s in whole["differing_sources"]] == [PARAM_RANK] * 2
    assert [g["rank"] for g in whole["differing_graph_inputs"]] == [INPUT_RANK] * 2
    assert [(u["rank"], u["side"]) for u in whole["unpaired"]] == [(EXTRA_RANK, "A")] * 2
    kernels = whole["kernels"]
    summary = whole["summary"]
    assert summary["kernels"] == len(kernels) == RANKS * 2 * (KERNELS + 1)
    for key in ("pass", "warning", "error", "unpaired"):
        assert summary[key] == sum(alone[r]["summary"][key] for r in range(RANKS)), key
    assert summary["pass"] + summary["warning"] + summary["error"] == len(kernels)

    # The planted error, measured as NumPy measures it.
    for rank, (i, size) in ERRORS.items():
        k = next(k for k in kernels if k["rank"] == rank and k["iteration"] == 0 and
                 k["kernel_a"].endswith(f"-op{i}"))
        assert k["adds_error"] and k["error_origin"] == k["kernel_a"]
        out = next(t for t in k["tensors"] if t["io"] == "output")
        # B (the noisy one) is the reference.
        max_abs, norm_rel = planted[rank]
        assert out["metrics"]["max_abs_err"] == pytest.approx(max_abs, rel=1e-6)
        assert out["metrics"]["norm_rel_err"] == pytest.approx(norm_rel, rel=1e-5)
        assert norm_rel == pytest.approx(size / (1 + size), rel=1e-4)

    # Contributors: every kernel adding error of every rank, the largest added error first,
    # then the larger growth, then the earlier kernel.
    position = {(k["rank"], k["iteration"], k["kernel_a"]): n for n, k in enumerate(kernels)}
    adding = [k for k in kernels if k["adds_error"] and k["role"] == "operator"]
    assert len(adding) == 2 * len(ERRORS)
    ranked = sorted(adding, key=lambda k: (-k["added_error"], -k["growth"],
                                           position[(k["rank"], k["iteration"], k["kernel_a"])]))
    contributors = whole["contributors"]
    assert [(c["rank"], c["iteration"], c["kernel"]) for c in contributors] == \
        [(k["rank"], k["iteration"], k["kernel_a"]) for k in ranked]
    assert [c["contribution_rank"] for c in contributors] == list(range(1, len(ranked) + 1))
    assert [k["contribution_rank"] for k in ranked] == list(range(1, len(ranked) + 1))
    assert all(k["contribution_rank"] == 0 for k in kernels if k not in adding)
    assert [c["rank"] for c in contributors[:2]] == [3, 3]  # the largest error
    # The tie of ranks 2 and 4 (the same data) goes by execution order: rank 2's first.
    tied = [(c["rank"], c["iteration"]) for c in contributors if c["rank"] in (2, 4)]
    assert tied == [(2, 0), (2, 1), (4, 0), (4, 1)] or tied == [(2, 0), (4, 0), (2, 1), (4, 1)]
    assert contributors[2]["added_error"] == contributors[3]["added_error"]
    # Each contributor is its rank pair's own, but for its rank over every rank.
    for c in contributors:
        mine = next(x for x in alone[c["rank"]]["contributors"]
                    if (x["iteration"], x["kernel"]) == (c["iteration"], c["kernel"]))
        assert dict(c, contribution_rank=None) == dict(mine, contribution_rank=None)
        assert c["float32_chain"]["kernels"][-1]["kernel"] == c["kernel"]

    # The first failure is rank 2's (ranks 0 and 1 agree), with its rank over every rank.
    for key in ("first_failure", "first_adding_error"):
        first = whole[key]
        assert (first["rank"], first["iteration"]) == (2, 0), key
        assert dict(first, contribution_rank=None) == \
            dict(alone[2][key], contribution_rank=None)
        assert first["contribution_rank"] == \
            next(k for k in kernels if k["rank"] == 2 and k["kernel_a"] == first["kernel"]
                 and k["iteration"] == 0)["contribution_rank"]


def test_out_beside_json_is_the_texts_csv(dumps, scratch):
    a, b, _ = dumps
    with_json, with_text = os.path.join(scratch, "json.csv"), os.path.join(scratch, "text.csv")
    js = compare(a, b, "--json", "--out", with_json)
    text = compare(a, b, "--out", with_text)
    assert js.returncode == text.returncode == 1
    with open(with_json, "rb") as f, open(with_text, "rb") as g:
        rows = f.read()
        assert rows == g.read()
    lines = rows.decode().splitlines()
    header = lines[0].split(",")
    assert header[-1] == "contribution_rank"
    ranks = sorted(int(line.rsplit(",", 1)[1]) for line in lines[1:])
    assert set(ranks) == set(range(0, 2 * len(ERRORS) + 1))


def test_replays_name_the_ranked_contributors(dumps, scratch):
    a, b, _ = dumps
    # graphdump beside a graphdump-torch that answers every replay with its arguments.
    fake = os.path.join(scratch, "bin")
    os.makedirs(fake)
    shutil.copy(BIN, os.path.join(fake, "graphdump"))
    with open(os.path.join(fake, "graphdump-torch"), "w") as f:
        f.write('#!/bin/sh\necho "{\\"verdict\\": \\"accurate\\", \\"args\\": \\"$*\\"}"\n')
    os.chmod(os.path.join(fake, "graphdump-torch"), 0o755)
    whole = json.loads(compare(a, b, "--json", "--replay", "3",
                               binary=os.path.join(fake, "graphdump")).stdout)
    replays = whole["replays"]
    # Distinct kernels of the ranked list: rank 3's kernel 2 once (both iterations add error).
    firsts = []
    for c in whole["contributors"]:
        if (c["rank"], c["kernel"]) not in [(x["rank"], x["kernel"]) for x in firsts]:
            firsts.append(c)
    assert [(r["kernel"], r["iteration"], r["contributor"]) for r in replays] == \
        [(c["kernel"], c["iteration"], c["contribution_rank"]) for c in firsts[:3]]
    for r, c in zip(replays, firsts):
        assert f"--rank {c['rank']} --json" in r["replay"]["args"]
    without = json.loads(compare(a, b, "--json").stdout)
    assert dict(whole, replays=None) == dict(without, replays=None)
    assert "replays" not in without


def test_no_temporary_file_is_left(dumps, scratch):
    a, b, _ = dumps
    tmp = os.path.join(scratch, "tmp")
    os.makedirs(tmp)
    p = compare(a, b, "--json", "--out", os.path.join(scratch, "x.csv"), env={"TMPDIR": tmp})
    assert p.returncode == 1 and json.loads(p.stdout)["kernels"], p.stderr
    assert os.listdir(tmp) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
