"""graphdump's analysis at cluster scale: a statistics-only dump replicated to many ranks (a NaN
planted in one rank's kernel and spread to every rank by the AllReduce after it), then `watch`,
`compare --ranks`, `graphdump.load` and `graphdump.load(ranks=0)` (one rank, rows/s counted over
that rank's rows) on it, each in a process of its own. Prints

  bench: analysis_rows_per_second watch=A compare_ranks=B load=C load_one_rank=D
         (target >= 1000000)
  bench: analysis_peak_rss_mib watch=A compare_ranks=B load=C load_one_rank=D (target < 1024
         at 1,024 ranks of 100,000 rows)

and checks that watch names the planted rank first and that load's row counts are right.
Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_BUILD_DIR (for the Python package),
GRAPHDUMP_BENCH_RANKS (default 256), GRAPHDUMP_BENCH_ROWS (statistic rows per rank and
iteration, two iterations; default 500; a small transformer has 11,740), GRAPHDUMP_BENCH_DUMP
(keep the generated dump in this directory and reuse it when it is there: for large sizes; the
ranks' files are hard links to one copy), GRAPHDUMP_BENCH_LOAD_ALL=0 (skip loading the whole
dump into one table, whose size grows with the dump: at 1,024 ranks of 100,000 rows it is
102 M rows), TMPDIR. Measured numbers: docs/analysis.md.
"""
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

RANKS = int(os.environ.get("GRAPHDUMP_BENCH_RANKS", "256"))
ROWS = int(os.environ.get("GRAPHDUMP_BENCH_ROWS", "500"))
BAD_RANK = RANKS // 2 + 1
HEADER = ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
          "Max Value,Min Value,Avg Value,L2Norm Value,NaN Count,Negative Inf Count,"
          "Positive Inf Count\n")


def kernel_names(count):
    """A chain of kernels, every 8th an AllReduce (what compare --ranks compares)."""
    names = []
    for i in range(count):
        kind = "AllReduce" if i % 8 == 7 else ("MatMul", "Add", "Mul", "Tanh")[i % 4]
        names.append(f"Default/net-Net/block{i // 8}-Block/{kind}-op{i}")
    return names


def statistic_csv(names, bad_kernel):
    """Input 0 and output 0 of each kernel; from `bad_kernel` on (None: never), NaN."""
    lines = [HEADER]
    for i, name in enumerate(names):
        op_type = name.rsplit("/", 1)[1].split("-op")[0]
        file_name = name.replace("/", "_").replace(".", "_")
        for io in ("input", "output"):
            nan = bad_kernel is not None and (i > bad_kernel or (i == bad_kernel and
                                                                 io == "output"))
            stats = "nan,nan,nan,nan,3,0,0" if nan else "1.5,-1.5,0.01,12.5,0,0,0"
            lines.append(f'{op_type},{file_name},0,0,{1700000000000000 + 2 * i},{io},0,1024,'
                         f'float32,"(16,16)",{stats}\n')
    return "".join(lines)


def write_dump(root):
    names = kernel_names(ROWS // 2)
    bad_kernel = len(names) // 2 - 2  # two kernels before an AllReduce
    order = "NodeExecutionOrder-FullNameWithScope\n" + "".join(n + "\n" for n in names)
    clean = statistic_csv(names, None)
    planted = statistic_csv(names, bad_kernel)
    spread = statistic_csv(names, ((bad_kernel // 8) + 1) * 8 - 1)  # from that AllReduce on
    # Each distinct file is written once and linked into every rank that holds it (hard links:
    # 1,024 ranks of 100,000 rows take the disk of one rank's files).
    written = {}

    def put(path, text):
        if text in written:
            os.link(written[text], path)
            return
        with open(path, "w") as f:
            f.write(text)
        written[text] = path

    for rank in range(RANKS):
        rank_dir = os.path.join(root, f"rank_{rank}")
        os.makedirs(os.path.join(rank_dir, "execution_order"))
        put(os.path.join(rank_dir, "execution_order", "ms_execution_order_graph_0.csv"), order)
        for iteration, text in ((0, clean), (1, planted if rank == BAD_RANK else spread)):
            it_dir = os.path.join(rank_dir, "Net", "0", str(iteration))
            os.makedirs(it_dir)
            put(os.path.join(it_dir, "statistic.csv"), text)
    return names[bad_kernel], 2 * RANKS * len(names) * 2


def measure(args, env=None):
    """Runs a command; returns (seconds, peak RSS in MiB, stdout)."""
    start = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, **(env or {})))
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, out.decode(), p.returncode


def main():
    binary = os.environ.get("GRAPHDUMP_BIN", "graphdump")
    build = os.environ.get("GRAPHDUMP_BUILD_DIR", "build")
    keep = os.environ.get("GRAPHDUMP_BENCH_DUMP")
    tmp = tempfile.mkdtemp(prefix="graphdump_scale_")
    try:
        root = keep or os.path.join(tmp, "dump")
        if keep and os.path.isdir(root):
            names = kernel_names(ROWS // 2)
            bad_name, rows = names[len(names) // 2 - 2], 2 * RANKS * len(names) * 2
        else:
            bad_name, rows = write_dump(root)
        print(f"{RANKS} ranks x {rows // RANKS} statistic rows = {rows} rows; NaN planted in "
              f"rank {BAD_RANK}, {bad_name}")
        # Text output (the first 20 hits): --json lists every hit, which at this scale is
        # gigabytes of text.
        watch = measure([binary, "watch", root, "-q"])
        first = re.search(r"^  -> rank (\d+) it \d+ (\S+) ", watch[2], re.M)
        if watch[3] != 1 or not first or (int(first[1]), first[2]) != (BAD_RANK, bad_name):
            print(f"bench: analysis_scale FAILED: watch's first hit is "
                  f"{first[0] if first else watch[2][:300]!r}", file=sys.stderr)
            return 1
        ranks = measure([binary, "compare", root, "--ranks", "-q"])
        load_all = os.environ.get("GRAPHDUMP_BENCH_LOAD_ALL", "1") != "0"
        load = None
        if load_all:
            load = measure(["/usr/bin/python3", "-c",
                            "import sys, graphdump; print(len(graphdump.load(sys.argv[1])))",
                            root], {"PYTHONPATH": os.path.join(build, "python")})
            if load[3] != 0 or int(load[2].split()[-1]) != rows:
                print(f"bench: analysis_scale FAILED: load gave {load[2]!r}", file=sys.stderr)
                return 1
        one = measure(["/usr/bin/python3", "-c",
                       "import sys, graphdump\n"
                       "print(len(graphdump.load(sys.argv[1], ranks=0)))", root],
                      {"PYTHONPATH": os.path.join(build, "python")})
        if one[3] != 0 or int(one[2].split()[-1]) != rows // RANKS:
            print(f"bench: analysis_scale FAILED: load(ranks=0) gave {one[2]!r}", file=sys.stderr)
            return 1
        results = {"watch": watch, "compare_ranks": ranks, "load": load, "load_one_rank": one}
        results = {k: v for k, v in results.items() if v is not None}
        counted = {"load_one_rank": rows // RANKS}
        print("bench: analysis_rows_per_second " +
              " ".join(f"{k}={counted.get(k, rows) / v[0]:.0f}" for k, v in results.items()) +
              " (target >= 1000000)")
        print("bench: analysis_peak_rss_mib " +
              " ".join(f"{k}={v[1]:.0f}" for k, v in results.items()) +
              " (target < 1024 at 1,024 ranks of 100,000 rows)")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
