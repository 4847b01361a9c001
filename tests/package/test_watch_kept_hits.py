"""watch's text output keeps only the hits it lists (docs/scale.md, memory and speed at scale):
on a statistics-only dump of 4 ranks where a NaN planted in rank 2 spreads to every rank, the text
with the default --limit, a small --limit and --first says what the text with every hit kept
(--limit 0) says: the same hit count, the same first lines, the same first hit of each rank and
the same summary of what followed it."""
import json
import os
import re

from conftest import graphdump as cli

RANKS = 4
BAD_RANK = 2
KERNELS = 40
HEADER = ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
          "Max Value,Min Value,Avg Value,L2Norm Value,NaN Count,Negative Inf Count,"
          "Positive Inf Count\n")


def names():
    return [f"Default/net-Net/block{i // 8}-Block/"
            f"{'AllReduce' if i % 8 == 7 else ('MatMul', 'Add', 'Mul', 'Tanh')[i % 4]}-op{i}"
            for i in range(KERNELS)]


def statistic_csv(bad):
    """Input 0 and output 0 of each kernel; from kernel `bad` on (None: never), NaN."""
    lines = [HEADER]
    for i, name in enumerate(names()):
        op_type = name.rsplit("/", 1)[1].split("-op")[0]
        for io in ("input", "output"):
            nan = bad is not None and (i > bad or (i == bad and io == "output"))
            stats = "nan,nan,nan,nan,3,0,0" if nan else "1.5,-1.5,0.01,12.5,0,0,0"
            lines.append(f'{op_type},{name.replace("/", "_")},0,0,{1000 + 2 * i},{io},0,1024,'
                         f'float32,"(16,16)",{stats}\n')
    return "".join(lines)


def make_dump(root):
    order = "NodeExecutionOrder-FullNameWithScope\n" + "".join(n + "\n" for n in names())
    for rank in range(RANKS):
        rank_dir = os.path.join(root, f"rank_{rank}")
        os.makedirs(os.path.join(rank_dir, "execution_order"))
        with open(os.path.join(rank_dir, "execution_order", "ms_execution_order_graph_0.csv"),
                  "w") as f:
            f.write(order)
        for iteration in (0, 1):
            it_dir = os.path.join(rank_dir, "Net", "0", str(iteration))
            os.makedirs(it_dir)
            bad = None if iteration == 0 else (10 if rank == BAD_RANK else 15)
            with open(os.path.join(it_dir, "statistic.csv"), "w") as f:
                f.write(statistic_csv(bad))


def watch(root, *args):
    p = cli("watch", root, "-q", *args)
    assert p.returncode == 1, p.stderr
    return p.stdout


def section(text, start):
    """The lines of `text` from the line starting with `start` on."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    return lines[first:]


def test_text_with_kept_hits_says_what_every_hit_says(tmp_path):
    root = str(tmp_path / "dump")
    make_dump(root)
    hits = json.loads(watch(root, "--json"))["hits"]
    # Rank 2 makes the NaN at kernel 10's output; the others get it at the AllReduce (kernel 15).
    assert (hits[0]["rank"], hits[0]["kernel"]) == (BAD_RANK, names()[10])
    every = watch(root, "--limit", "0")
    assert f"{len(hits)} hit(s)" in every.splitlines()[0]
    for limit in ("20", "2"):
        kept = watch(root, "--limit", limit)
        assert kept.splitlines()[0] == every.splitlines()[0]
        n = int(limit)
        assert kept.splitlines()[1:1 + n] == every.splitlines()[1:1 + n]
        assert kept.splitlines()[1 + n] == (
            f"  ... {len(hits) - n} more hit(s) (--limit 0 prints all; --first summarises them)")
        assert section(kept, "first hit per rank") == section(every, "first hit per rank")
    # --first: what followed rank 2's first hit, counted over every hit of that rank.
    first_kept = watch(root, "--first")
    assert first_kept == watch(root, "--first", "--limit", "0")
    later = sum(1 for h in hits if h["rank"] == BAD_RANK) - 1
    then = re.search(r"^then: (\d+) more hit\(s\) on this rank, (\d+) other kernel\(s\), "
                     r"iterations 1 to 1; next hit: (.*)$", first_kept, re.M)
    assert then, first_kept
    assert int(then[1]) == later
    assert int(then[2]) == KERNELS - 11
    assert then[3].startswith(", ".join(names()[11:16]) + f" (and {KERNELS - 16} more)")
