"""Statistics on float32 data: graphdump's fused pass against NumPy, side by side.

Generates GRAPHDUMP_BENCH_STATS_MIB (default 256) MiB of float32 once (normal values with some
NaN, +-Inf and zeros), saves it as .npy in a temporary directory, then times (best of
GRAPHDUMP_BENCH_REPEAT runs, default 5, warm cache, same data):
  - NumPy in-process: the eleven statistics (astype(float64), max, min, mean, count, negative /
    positive / nan / -inf / +inf / zero counts, sqrt of the sum of squares), and separately
    max, min and linalg.norm of the float32 array;
  - graphdump: ComputeStats without md5 over the same file, mapped into memory, by
    build/bench/stats_file_bench: all eleven, and what the default statistic_category
    (max, min, l2norm) asks for.
Prints
  bench: stats_eleven_vs_numpy ratio=X       NumPy eleven / graphdump eleven   (target >= 10)
  bench: stats_max_min_l2_vs_numpy ratio=X   NumPy max+min+norm / graphdump max+min+l2norm
                                             (target >= 2)
"""
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def best_of(repeat, fn):
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def numpy_eleven(a):
    d = a.astype(np.float64)
    nan = np.isnan(d)
    return dict(max=d.max(), min=d.min(), avg=d.mean(), count=d.size,
                negative_count=int(np.count_nonzero(d < 0)),
                positive_count=int(np.count_nonzero(d > 0)),
                nan_count=int(np.count_nonzero(nan)),
                negative_inf_count=int(np.count_nonzero(d == -np.inf)),
                positive_inf_count=int(np.count_nonzero(d == np.inf)),
                zero_count=int(np.count_nonzero(d == 0)),
                l2norm=math.sqrt(np.dot(d, d)))


def numpy_max_min_l2(a):
    return a.max(), a.min(), np.linalg.norm(a)


def main():
    build = os.environ.get("GRAPHDUMP_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "build"))
    exe = os.path.join(build, "bench", "stats_file_bench")
    if not os.path.exists(exe):
        print(f"stats_vs_numpy: {exe} not built (configure with -DGRAPHDUMP_BUILD_BENCH=ON)")
        return 1
    mib = int(os.environ.get("GRAPHDUMP_BENCH_STATS_MIB", "256"))
    repeat = int(os.environ.get("GRAPHDUMP_BENCH_REPEAT", "5"))
    n = mib * (1 << 20) // 4
    rng = np.random.default_rng(7)
    a = rng.standard_normal(n, dtype=np.float32) * 10
    special = rng.integers(0, n, size=n // 1000)
    a[special[0::4]] = np.nan
    a[special[1::4]] = np.inf
    a[special[2::4]] = -np.inf
    a[special[3::4]] = 0
    with tempfile.TemporaryDirectory(prefix="graphdump_stats_bench_") as tmp:
        path = os.path.join(tmp, "data.npy")
        np.save(path, a)
        # Interleave the sides so that both see the same machine load.
        numpy_all, numpy_mml, ours, ours_mml = math.inf, math.inf, math.inf, math.inf
        expected = numpy_eleven(a)

        def run(mode):
            out = subprocess.run([exe, path, str(repeat), mode], check=True, capture_output=True,
                                 text=True).stdout
            return dict(line.split("=", 1) for line in out.split())

        got, got_values = {}, {}
        for _ in range(2):
            numpy_all = min(numpy_all, best_of(repeat, lambda: numpy_eleven(a)))
            numpy_mml = min(numpy_mml, best_of(repeat, lambda: numpy_max_min_l2(a)))
            got, got_values = run("all"), run("values")
            ours = min(ours, float(got["seconds"]))
            ours_mml = min(ours_mml, float(got_values["seconds"]))
    for key in ("count", "nan_count", "zero_count", "negative_count", "positive_count",
                "negative_inf_count", "positive_inf_count"):
        if int(got[key]) != expected[key]:
            print(f"stats_vs_numpy: {key} differs: graphdump {got[key]}, numpy {expected[key]}")
            return 1
    if got_values["max"] != "nan" or got_values["count"] != got["count"]:
        print(f"stats_vs_numpy: max/min/l2norm run gave max={got_values['max']} "
              f"count={got_values['count']}; expected nan (the data holds NaN) and {got['count']}")
        return 1
    print(f"{mib} MiB float32 ({got['kernels']} kernels): numpy eleven {numpy_all:.4f}s, "
          f"graphdump eleven {ours:.4f}s; numpy max/min/norm {numpy_mml:.4f}s, "
          f"graphdump max/min/l2norm {ours_mml:.4f}s")
    print(f"bench: stats_eleven_vs_numpy ratio={numpy_all / ours:.2f}")
    print(f"bench: stats_max_min_l2_vs_numpy ratio={numpy_mml / ours_mml:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
