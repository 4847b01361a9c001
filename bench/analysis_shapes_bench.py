"""graphdump's analysis on dumps of unusual shape, each at a size and at four times it, to show
that the work grows with the dump and not with its square:

  calls       one kernel called N times in a step, each call a tensor file and a statistic.csv
              row (a loop dumped with saved_data "full"): `ls`
  renamed     two runs of N kernels whose names all differ (two frameworks), so every kernel
              is left to pairing by execution order, and whose op types differ after the
              first: `compare A B -q`
  iterations  N iteration directories of three kernels each: `ls`
  trace       N traced kernels, half of them missing from the execution order: `trace`

Prints

  bench: analysis_shape_growth calls=A renamed=B iterations=C trace=D
         (CPU seconds at 4N over those at N: 4 is linear, 16 quadratic)
  bench: analysis_shape_cpu_seconds calls=A/B ... (at N and at 4N)

Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_BENCH_SHAPE_SCALE (multiplies every N; default
1: N is 10,000 calls, 15,000 kernels, 2,000 iterations and 20,000 traced kernels), TMPDIR.
"""
import io
import os
import subprocess
import sys
import tempfile

import numpy

BIN = os.environ.get("GRAPHDUMP_BIN", "build/tools/graphdump")
SCALE = float(os.environ.get("GRAPHDUMP_BENCH_SHAPE_SCALE", "1"))
HEADER = ("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
          "Max Value,Min Value\n")
T0 = 1700000000000000


def row(op_type, name, timestamp):
    return f'{op_type},{name},0,0,{timestamp},output,0,16,float32,"(4)",1,0\n'


def iteration_dir(root, iteration=0):
    d = os.path.join(root, "rank_0", "Net", "0", str(iteration))
    os.makedirs(d)
    return d


def make_calls(root, n):
    d = iteration_dir(root)
    buffer = io.BytesIO()
    numpy.save(buffer, numpy.ones(4, dtype=numpy.float32))
    data = buffer.getvalue()
    with open(os.path.join(d, "statistic.csv"), "w") as f:
        f.write(HEADER)
        for i in range(n):
            f.write(row("Mul", "Default_loop-Mul-op0", T0 + i))
            name = f"Mul.Default_loop-Mul-op0.0.0.{T0 + i}.output.0.DefaultFormat.float32.npy"
            with open(os.path.join(d, name), "wb") as npy:
                npy.write(data)
    return ["ls", root]


def make_renamed(root, n):
    # One kernel of B shares A's op type: the rest of A finds no partner after it.
    for side in ("a", "b"):
        d = iteration_dir(os.path.join(root, side))
        with open(os.path.join(d, "statistic.csv"), "w") as f:
            f.write(HEADER + "".join(
                row("Conv" if side == "a" or i == 0 else "Gemm", f"Default_{side}{i}-op{i}", T0 + i)
                for i in range(n)))
    return ["compare", os.path.join(root, "a"), os.path.join(root, "b"), "-q"]


def make_iterations(root, n):
    for it in range(n):
        with open(os.path.join(iteration_dir(root, it), "statistic.csv"), "w") as f:
            f.write(HEADER + "".join(row("Mul", f"Default_Mul-op{k}", T0 + 10 * it + k)
                                     for k in range(3)))
    return ["ls", root]


def make_trace(root, n):
    names = [f"Default/net-Net/Mul-op{i}" for i in range(n)]
    d = iteration_dir(root)
    with open(os.path.join(d, "statistic.csv"), "w") as f:
        f.write(HEADER + "".join(row("Mul", name.replace("/", "_"), T0 + i)
                                 for i, name in enumerate(names)))
    for sub, text in (("graphs", "".join(f"%{i}(x) = Mul(%{i - 1})\n"
                                         f"    # Fullname with scope: ({name})\n"
                                         f"    # In file model.py({10 + i % 100})/    x = f(x)/\n"
                                         for i, name in enumerate(names))),
                      ("execution_order", "NodeExecutionOrder-FullNameWithScope\n" +
                       "".join(name + "\n" for name in names[::2]))):
        os.makedirs(os.path.join(root, "rank_0", sub))
        file = "ms_output_trace_code_graph_0.ir" if sub == "graphs" else \
            "ms_execution_order_graph_0.csv"
        with open(os.path.join(root, "rank_0", sub, file), "w") as f:
            f.write(text)
    return ["trace", root, "model.py:12", "--json"]


SHAPES = {"calls": (make_calls, 10000), "renamed": (make_renamed, 15000),
          "iterations": (make_iterations, 2000), "trace": (make_trace, 20000)}


def cpu_seconds(args):
    """The CPU (user + system) of one run of the CLI; the better of two (a shared machine)."""
    best = None
    for _ in range(2):
        p = subprocess.Popen([BIN] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            print(f"bench: analysis_shapes FAILED: {' '.join(args)}: {err.decode()[-300:]}",
                  file=sys.stderr)
            sys.exit(1)
        seconds = usage.ru_utime + usage.ru_stime
        best = seconds if best is None else min(best, seconds)
    return best


def main():
    growth, cpu = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (make, n) in SHAPES.items():
            n = int(n * SCALE)
            small = cpu_seconds(make(os.path.join(tmp, f"{name}_1"), n))
            large = cpu_seconds(make(os.path.join(tmp, f"{name}_4"), 4 * n))
            growth[name] = large / max(small, 1e-3)
            cpu[name] = f"{small:.2f}/{large:.2f}"
    print("bench: analysis_shape_growth " + " ".join(f"{k}={v:.1f}" for k, v in growth.items()) +
          " (CPU seconds at 4N over those at N: 4 is linear, 16 quadratic)")
    print("bench: analysis_shape_cpu_seconds " + " ".join(f"{k}={v}" for k, v in cpu.items()) +
          " (at N and at 4N)")


if __name__ == "__main__":
    main()
