#!/usr/bin/env python3
"""graphdump convert vs. a NumPy reshape/transpose converter on FRACTAL_Z / NC1HWC0 float16.

Writes Ascend dump files (docs/ascend.md) holding float16 NC1HWC0 activations and FRACTAL_Z conv
weights (channel counts not multiples of 16, so both converters must crop), then converts them
to NCHW .npy files twice:
  numpy:      one Python process doing what msaccucmp's converter does per tensor: read, reshape,
              transpose, crop, np.save (the baseline)
  graphdump:  graphdump convert DIR -o OUT -f NCHW (default threads, and -j 1)
and checks (in the first round) that every array both converters wrote is the same. Every timed
run starts from the same state: the previous run's output deleted and no dirty pages (os.sync).
A converter that runs while another's 2 GiB of output still fills the page cache pays for
reclaiming it: graphdump's two threads took twice their usual CPU that way when they ran right
after NumPy. Everything runs BENCH_ROUNDS times (default 3), back to back, and each ratio
printed is the median of the rounds' ratios (the rounds' values are printed before): this
machine's speed moves by tens of percent between minutes. Prints
  bench: convert_vs_numpy ratio=X            (numpy seconds / graphdump seconds)
  bench: convert_vs_numpy_1thread ratio=X
  bench: convert_vs_numpy_cpu ratio=X        (CPU seconds, numpy / graphdump -j1: the number
                                             that does not depend on other load on the machine)
  bench: convert_write_floor_vs_numpy ratio=X  (numpy seconds / dd writing the output's bytes:
                                             the ratio a single-threaded converter with free
                                             transposes would reach)
  bench: convert_write_floor_2streams_vs_numpy ratio=X  (the same with two dd's writing half
                                             each at once: the floor for two threads)

Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_BENCH_CONVERT_MIB (total tensor MiB, default
2048), GRAPHDUMP_BENCH_DIR (scratch directory, default $TMPDIR), BENCH_ROUNDS.
"""
import hashlib
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import benchutil  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))
from make_ascend_dump import load_proto_module  # noqa: E402
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("GRAPHDUMP_BIN", os.path.join(ROOT, "build", "tools", "graphdump"))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "3")))
TOTAL_MIB = int(os.environ.get("GRAPHDUMP_BENCH_CONVERT_MIB", "2048"))

NC1HWC0, FRACTAL_Z, FLOAT16 = 3, 4, 2


def ceil_div(a, b):
    return -(-a // b)


def device_shape(fmt, shape):
    n, c, h, w = shape
    if fmt == NC1HWC0:
        return (n, ceil_div(c, 16), h, w, 16)
    return (ceil_div(c, 16) * h * w, ceil_div(n, 16), 16, 16)


# (format, NCHW original shape): ~24.5 MiB activations and ~17 MiB weights.
KINDS = [(NC1HWC0, (16, 250, 56, 56)), (FRACTAL_Z, (1000, 1000, 3, 3))]


def write_dumps(pb, directory):
    rng = np.random.default_rng(1)
    total = 0
    k = 0
    pool = rng.integers(0, 0x3c00, size=32 << 20, dtype=np.uint16).tobytes()  # finite halves
    while total < TOTAL_MIB << 20:
        fmt, shape = KINDS[k % len(KINDS)]
        dev = device_shape(fmt, shape)
        size = int(np.prod(dev)) * 2
        msg = pb.DumpData(version="2.0", dump_time=1700000000000000 + k, op_name="bench/op%d" % k)
        t = msg.output.add()
        t.data_type, t.format, t.size = FLOAT16, fmt, size
        t.shape.dim.extend(dev)
        t.original_shape.dim.extend(shape)
        header = msg.SerializeToString()
        name = "Conv2D.bench_Conv2D-op%d.0.0.%d" % (k, 1700000000000000 + k)
        with open(os.path.join(directory, name), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            left = size
            while left:
                chunk = min(left, len(pool))
                f.write(pool[:chunk])
                left -= chunk
        total += size
        k += 1
    return total, k


def numpy_convert(pb, src_dir, out_dir):
    """The baseline: msaccucmp-style reshape/transpose/crop with NumPy, then np.save."""
    for name in sorted(os.listdir(src_dir)):
        raw = np.fromfile(os.path.join(src_dir, name), dtype=np.uint8)
        (header_len,) = struct.unpack("<Q", raw[:8].tobytes())
        msg = pb.DumpData()
        msg.ParseFromString(raw[8:8 + header_len].tobytes())
        offset = 8 + header_len
        for i, t in enumerate(msg.output):
            data = raw[offset:offset + t.size].view(np.float16).reshape(tuple(t.shape.dim))
            offset += t.size
            n, c, h, w = t.original_shape.dim
            if t.format == NC1HWC0:
                host = data.transpose(0, 1, 4, 2, 3).reshape(n, -1, h, w)[:, :c]
            else:
                c1 = t.shape.dim[0] // (h * w)
                host = data.reshape(c1, h, w, -1, 16).transpose(3, 0, 4, 1, 2)
                host = host.reshape(host.shape[0], c1 * 16, h, w)[:n, :c]
            np.save(os.path.join(out_dir, "%s.output.%d.%s.npy" % (
                name, i, "x".join(map(str, host.shape)))), np.ascontiguousarray(host))


# Printed ratios: numerator label, denominator label, 0 for wall or 1 for CPU seconds.
RATIOS = {
    "convert_vs_numpy": ("numpy", "graphdump convert", 0),
    "convert_vs_numpy_1thread": ("numpy", "graphdump convert -j1", 0),
    "convert_vs_numpy_cpu": ("numpy", "graphdump convert -j1", 1),
    "convert_write_floor_vs_numpy": ("numpy", "dd (write only)", 0),
    "convert_write_floor_2streams_vs_numpy": ("numpy", "2 dd's, half each", 0),
}


def timed(fn):
    """(wall seconds, CPU seconds of this process and its children)."""
    def cpu():
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    start, start_cpu = time.perf_counter(), cpu()
    fn()
    return time.perf_counter() - start, cpu() - start_cpu


def main():
    pb = load_proto_module()
    scratch = tempfile.mkdtemp(prefix="convert_bench_", dir=os.environ.get("GRAPHDUMP_BENCH_DIR"))
    try:
        src = os.path.join(scratch, "dump")
        os.makedirs(src)
        total, files = write_dumps(pb, src)
        out_np, out_gd, out_gd1 = (os.path.join(scratch, d) for d in ("np", "gd", "gd1"))

        # Every run starts with no dirty page cache: the kernel throttles a writer once enough
        # earlier output waits for the disk, which would penalise whichever side ran later.
        def clean_start(fn):
            os.sync()
            return timed(fn)

        def graphdump(out, *flags):
            subprocess.run([BIN, "convert", src, "-o", out, "-f", "NCHW", "-q", *flags],
                           check=True, stdout=subprocess.DEVNULL)

        def arrays(out):
            """{file name: (dtype, shape, digest of the data)} of every .npy under `out`."""
            found = {}
            for name in sorted(os.listdir(out)):
                a = np.load(os.path.join(out, name), mmap_mode="r")
                found[name] = (a.dtype.str, a.shape,
                               hashlib.blake2b(np.ascontiguousarray(a)).hexdigest())
            return found

        def one_round(check):
            """{label: (wall, cpu)} of every converter and floor, run back to back, each after
            the previous one's output was deleted."""
            os.makedirs(out_np)
            t = {"numpy": clean_start(lambda: numpy_convert(pb, src, out_np))}
            out_bytes = sum(os.path.getsize(os.path.join(out_np, f)) for f in os.listdir(out_np))
            expected = arrays(out_np) if check else None
            shutil.rmtree(out_np)
            for label, out, flags in (("graphdump convert", out_gd, ()),
                                      ("graphdump convert -j1", out_gd1, ("-j", "1"))):
                t[label] = clean_start(lambda: graphdump(out, *flags))
                if check:
                    got = arrays(out)
                    missing = sorted(got.keys() ^ expected.keys())
                    assert not missing, (label, "files only one converter wrote", missing[:4])
                    bad = [name for name in got if got[name] != expected[name]]
                    assert not bad, (label, "differs from numpy", bad[:4])
                shutil.rmtree(out)
            # The floor of any converter that writes these files through the page cache: dd
            # writing the same number of bytes in one stream (what a converter with free
            # transposes would cost on one thread).
            t["dd (write only)"] = clean_start(lambda: benchutil.dd_write(
                os.path.join(scratch, "dd.bin"), out_bytes, 4 << 20))
            os.remove(os.path.join(scratch, "dd.bin"))

            def two_streams():  # the floor for two threads: two dd's writing half each at once
                halves = [threading.Thread(target=benchutil.dd_write,
                                           args=(os.path.join(scratch, "dd%d.bin" % k),
                                                 out_bytes // 2, 4 << 20)) for k in range(2)]
                for h in halves:
                    h.start()
                for h in halves:
                    h.join()

            t["2 dd's, half each"] = clean_start(two_streams)
            for k in range(2):
                os.remove(os.path.join(scratch, "dd%d.bin" % k))
            return t

        mib = total / (1 << 20)
        print("convert %d files, %.0f MiB float16 (NC1HWC0 %s, FRACTAL_Z %s), %d cores, "
              "load average %.1f, %d rounds" % (files, mib, KINDS[0][1], KINDS[1][1],
                                                os.cpu_count(), os.getloadavg()[0], ROUNDS))
        ratios = {name: [] for name in RATIOS}
        for r in range(ROUNDS):
            t = one_round(check=r == 0)
            print("round %d/%d" % (r + 1, ROUNDS))
            for label, (wall, cpu) in t.items():
                print("  %-22s wall %6.2f s (%6.0f MiB/s)  cpu %6.2f s" % (label, wall,
                                                                           mib / wall, cpu))
            for name, (num, den, index) in RATIOS.items():
                ratios[name].append(t[num][index] / t[den][index])
        for name, values in ratios.items():
            print("convert_bench: %s in each round: %s" % (name, ", ".join("%.2f" % v
                                                                         for v in values)))
        for name, values in ratios.items():
            print("bench: %s ratio=%.2f" % (name, statistics.median(values)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
