#!/usr/bin/env python3
"""compare over one kernel with many tensors (an Ascend dump file of N outputs, in A and B):
time per N. Pairing a kernel's tensors is linear in N (it was quadratic: a search of B's
tensors for each of A's).

usage: GRAPHDUMP_BIN=build/tools/graphdump .venv/bin/python bench/compare_tensors_bench.py [N...]
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
import make_ascend_dump  # noqa: E402  (the DumpData message, compiled with protoc)

BIN = os.environ.get("GRAPHDUMP_BIN", "build/tools/graphdump")


def write_dump(root, n, offset):
    pb = make_ascend_dump.load_proto_module()
    d = os.path.join(root, "20261122010203", "0", "net", "0", "0")
    os.makedirs(d)
    dump = pb.DumpData(version="2.0", op_name="Default/Fused-op1")
    payload = []
    for i in range(n):
        o = dump.output.add(data_type=1, format=2, size=8)
        o.shape.dim.extend([2])
        o.original_shape.dim.extend([2])
        payload.append(np.array([i, offset - i], dtype=np.float32).tobytes())
    header = dump.SerializeToString()
    with open(os.path.join(d, "Fused.Default_Fused-op1.0.0.1700"), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + b"".join(payload))


def main(sizes):
    for n in sizes:
        work = tempfile.mkdtemp(prefix="compare_bench_")
        try:
            write_dump(os.path.join(work, "a"), n, 0.0)
            write_dump(os.path.join(work, "b"), n, 0.5)
            start = time.perf_counter()
            p = subprocess.run([BIN, "compare", os.path.join(work, "a"), os.path.join(work, "b"),
                                "--json"], capture_output=True)
            seconds = time.perf_counter() - start
            print(f"{n:>7} tensors of one kernel: compare {seconds:.2f} s (exit {p.returncode})")
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [20000, 40000, 80000, 160000])
