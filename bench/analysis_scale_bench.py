"""graphdump's analysis at cluster scale: a statistics-only dump replicated to many ranks (a NaN
planted in one rank's kernel and spread to every rank by the AllReduce after it; every kernel
traced to a line of model.py), then `watch`, `compare --ranks`, `graphdump.load`,
`graphdump.load(ranks=0)` (one rank, rows/s counted over that rank's rows), `ls`, `trace`,
`report`, `report --compare`, a two-run `compare` (the dump against itself: every row is read
twice, rows/s counts one side) and the same with --json (`compare_json`: every kernel's
comparison, written to a file) on it, each in a process of its own. Prints

  bench: analysis_rows_per_second watch=A compare_ranks=B load=C load_one_rank=D ls=E ...
         (target >= 1000000)
  bench: analysis_peak_rss_mib watch=A compare_ranks=B load=C load_one_rank=D ls=E ...
         (target < 1024 at 1,024 ranks of 100,000 rows)
  bench: analysis_cpu_seconds watch=A compare_ranks=B ...   (user + system: the wall time of
         a shared machine says less)

and checks each answer: watch names the planted rank first, load's and ls's row counts, trace's
kernel on every rank, compare's kernel count (with and without --json), the report written.
Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_BUILD_DIR (for the Python package),
GRAPHDUMP_BENCH_RANKS (default 256), GRAPHDUMP_BENCH_ROWS (statistic rows per rank and
iteration, two iterations; default 500; a small transformer has 11,740), GRAPHDUMP_BENCH_DUMP
(keep the generated dump in this directory and reuse it when it is there: for large sizes; the
ranks' files are hard links to one copy), GRAPHDUMP_BENCH_COMMANDS (a comma-separated subset of
the names above, default all; `load` loads the whole dump into one table, whose size grows with
the dump: at 1,024 ranks of 100,000 rows it is 102 M rows), TMPDIR. Measured numbers:
docs/scale.md.
"""
import json
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


def source_ir(names):
    """An .ir naming model.py line 10 + i as kernel i's source (what trace finds)."""
    return "".join(f"%{i}(x) = Op(%{i - 1})\n    # Fullname with scope: ({name})\n"
                   f"    # In file model.py({10 + i})/    x = layer{i}(x)/\n"
                   for i, name in enumerate(names))


def write_dump(root):
    names = kernel_names(ROWS // 2)
    bad_kernel = len(names) // 2 - 2  # two kernels before an AllReduce
    order = "NodeExecutionOrder-FullNameWithScope\n" + "".join(n + "\n" for n in names)
    ir = source_ir(names)
    clean = statistic_csv(names, None)
    planted = statistic_csv(names, bad_kernel)
    spread = statistic_csv(names, ((bad_kernel // 8) + 1) * 8 - 1)  # from that AllReduce on
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
        os.makedirs(os.path.join(rank_dir, "graphs"))
        put(os.path.join(rank_dir, "graphs", "ms_output_trace_code_graph_0.ir"), ir)
        for iteration, text in ((0, clean), (1, planted if rank == BAD_RANK else spread)):
            it_dir = os.path.join(rank_dir, "Net", "0", str(iteration))
            os.makedirs(it_dir)
            put(os.path.join(it_dir, "statistic.csv"), text)
    return names[bad_kernel], 2 * RANKS * len(names) * 2


def measure(args, env=None, stdout=None):
    """Runs a command; returns (seconds, peak RSS in MiB, stdout, exit status, CPU seconds).
    With `stdout` (a path), its output goes there and the stdout returned is empty."""
    start = time.perf_counter()
    sink = open(stdout, "wb") if stdout else subprocess.PIPE
    p = subprocess.Popen(args, stdout=sink, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, **(env or {})))
    out = p.stdout.read() if not stdout else b""
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - start
    if stdout:
        sink.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    return (seconds, usage.ru_maxrss / 1024, out.decode(), p.returncode,
            usage.ru_utime + usage.ru_stime)


def failed(what, got):
    print(f"bench: analysis_scale FAILED: {what} gave {got!r}", file=sys.stderr)
    return None


def run_watch(binary, root, rows, bad_name, build, out_dir):
    # Text output (the first 20 hits): --json lists every hit, which at this scale is gigabytes.
    watch = measure([binary, "watch", root, "-q"])
    first = re.search(r"^  -> rank (\d+) it \d+ (\S+) ", watch[2], re.M)
    if watch[3] != 1 or not first or (int(first[1]), first[2]) != (BAD_RANK, bad_name):
        return failed("watch's first hit", first[0] if first else watch[2][:300])
    return watch


def run_compare_ranks(binary, root, rows, bad_name, build, out_dir):
    return measure([binary, "compare", root, "--ranks", "-q"])


def run_load(binary, root, rows, bad_name, build, out_dir):
    load = measure([sys.executable, "-c",
                    "import sys, graphdump; print(len(graphdump.load(sys.argv[1])))", root],
                   {"PYTHONPATH": os.path.join(build, "python")})
    if load[3] != 0 or int(load[2].split()[-1]) != rows:
        return failed("load", load[2])
    return load


def run_load_one_rank(binary, root, rows, bad_name, build, out_dir):
    one = measure([sys.executable, "-c",
                   "import sys, graphdump\n"
                   "print(len(graphdump.load(sys.argv[1], ranks=0)))", root],
                  {"PYTHONPATH": os.path.join(build, "python")})
    if one[3] != 0 or int(one[2].split()[-1]) != rows // RANKS:
        return failed("load(ranks=0)", one[2])
    return one


def run_ls(binary, root, rows, bad_name, build, out_dir):
    ls = measure([binary, "ls", root, "--json"])
    if ls[3] != 0 or json.loads(ls[2])["total"]["statistic_rows"] != rows:
        return failed("ls", ls[2][-300:])
    return ls


def run_trace(binary, root, rows, bad_name, build, out_dir):
    line = 10 + kernel_names(ROWS // 2).index(bad_name)
    trace = measure([binary, "trace", root, f"model.py:{line}", "--json"])
    found = json.loads(trace[2]) if trace[3] == 0 else []
    if len(found) != RANKS or any(m["kernel"] != bad_name or len(m["files"]) != 4
                                  for m in found):
        return failed("trace", trace[2][-300:])
    return trace


def run_report(binary, root, rows, bad_name, build, out_dir):
    out = os.path.join(out_dir, "report.html")
    report = measure([binary, "report", root, "-o", out])
    if report[3] != 0 or not os.path.getsize(out):
        return failed("report", report[2])
    return report


def run_report_compare(binary, root, rows, bad_name, build, out_dir):
    out = os.path.join(out_dir, "compare.html")
    report = measure([binary, "report", "--compare", root, root, "-o", out])
    if report[3] != 0 or not os.path.getsize(out):
        return failed("report --compare", report[2])
    return report


def run_compare(binary, root, rows, bad_name, build, out_dir):
    compare = measure([binary, "compare", root, root, "-q"])
    if compare[3] != 0 or f"kernels: {rows // 2} paired" not in compare[2]:
        return failed("compare A A", compare[2][-300:])
    return compare


def run_compare_json(binary, root, rows, bad_name, build, out_dir):
    # Every kernel's comparison (hundreds of MB): written to a file, its summary read back from
    # the end (the document's keys are sorted: "summary" and "unpaired" close it).
    out = os.path.join(out_dir, "compare.json")
    compare = measure([binary, "compare", root, root, "--json", "-q"], stdout=out)
    with open(out, "rb") as f:
        f.seek(max(0, os.path.getsize(out) - 4096))
        tail = f.read().decode(errors="replace")
    os.unlink(out)
    found = re.search(r'"summary": \{[^}]*"kernels": (\d+)', tail)
    if compare[3] != 0 or not found or int(found[1]) != rows // 2:
        return failed("compare A A --json", tail[-300:])
    return compare


COMMANDS = {"watch": run_watch, "compare_ranks": run_compare_ranks, "load": run_load,
            "load_one_rank": run_load_one_rank, "ls": run_ls, "trace": run_trace,
            "report": run_report, "report_compare": run_report_compare, "compare": run_compare,
            "compare_json": run_compare_json}


def main():
    binary = os.environ.get("GRAPHDUMP_BIN", "graphdump")
    build = os.environ.get("GRAPHDUMP_BUILD_DIR", "build")
    keep = os.environ.get("GRAPHDUMP_BENCH_DUMP")
    chosen = os.environ.get("GRAPHDUMP_BENCH_COMMANDS", ",".join(COMMANDS)).split(",")
    unknown = [c for c in chosen if c not in COMMANDS]
    if unknown:
        print(f"bench: analysis_scale: GRAPHDUMP_BENCH_COMMANDS: unknown {', '.join(unknown)} "
              f"(known: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
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
        results = {}
        for name in chosen:
            result = COMMANDS[name](binary, root, rows, bad_name, build, tmp)
            if result is None:
                return 1
            results[name] = result
        counted = {"load_one_rank": rows // RANKS}
        print("bench: analysis_rows_per_second " +
              " ".join(f"{k}={counted.get(k, rows) / v[0]:.0f}" for k, v in results.items()) +
              " (target >= 1000000)")
        print("bench: analysis_peak_rss_mib " +
              " ".join(f"{k}={v[1]:.0f}" for k, v in results.items()) +
              " (target < 1024 at 1,024 ranks of 100,000 rows)")
        print("bench: analysis_cpu_seconds " +
              " ".join(f"{k}={v[4]:.2f}" for k, v in results.items()))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
