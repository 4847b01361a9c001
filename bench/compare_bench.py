"""graphdump compare vs a NumPy script computing the same metrics file by file (msprobe-style).

Builds two dumps of GRAPHDUMP_BENCH_GIB GiB each (default 2) in a temporary directory (deleted
afterwards), runs both comparisons on the same files and prints:

  bench: compare_vs_numpy ratio=X      (NumPy seconds / graphdump seconds; target >= 10)
  bench: compare_peak_rss graphdump_mib=A numpy_mib=B

Environment: GRAPHDUMP_BIN (the CLI), GRAPHDUMP_BENCH_GIB (size of each dump),
GRAPHDUMP_BENCH_FILE_MIB (size of each tensor file, default 16), TMPDIR (where dumps go).
Both runs read the same, freshly written files, so the page cache is warm for both when the
machine has the memory; run with GRAPHDUMP_BENCH_GIB large enough to exceed it to measure disk.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

NUMPY_COMPARE = r'''
import sys, glob, os
import numpy as np
EPS = np.finfo(float).eps
a_dir, b_dir, atol, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rows = 0
for a_path in sorted(glob.glob(os.path.join(a_dir, '*.npy'))):
    b_path = os.path.join(b_dir, os.path.basename(a_path))
    a = np.load(a_path).astype(np.float64).ravel()
    b = np.load(b_path).astype(np.float64).ravel()
    diff = np.abs(a - b)
    rel = diff / (np.abs(b) + EPS)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    cos = a.dot(b) / (na * nb) if na and nb else float(na == nb)
    metrics = (cos, diff.max(), rel.max(), np.sqrt((diff * diff).mean()), (rel < 0.001).mean(),
               (rel < 0.005).mean(), int((diff > atol + rtol * np.abs(b)).sum()),
               int(np.isnan(a).sum()), int(np.isnan(b).sum()))
    rows += 1
print('numpy compared', rows, 'files')
'''


def write_dump(root, files, elements, perturb):
    rng = np.random.default_rng(0)
    it_dir = os.path.join(root, 'rank_0', 'Net', '0', '0')
    os.makedirs(it_dir)
    order = os.path.join(root, 'rank_0', 'execution_order')
    os.makedirs(order)
    with open(os.path.join(order, 'ms_execution_order_graph_0.csv'), 'w') as f:
        f.write('NodeExecutionOrder-FullNameWithScope\n')
        for i in range(files):
            f.write('Default/net-Net/layer%d-Layer/MatMul-op%d\n' % (i, i))
    base = rng.standard_normal(elements, dtype=np.float32)
    for i in range(files):
        x = np.roll(base, i * 7919)
        if perturb:
            x = x * np.float32(1 + 1e-6) + np.float32(1e-7)
        name = 'MatMul.Default_net-Net_layer%d-Layer_MatMul-op%d.0.0.%d.output.0.DefaultFormat.float32.npy' % (
            i, i, 1700000000000000 + i)
        np.save(os.path.join(it_dir, name), x)
    return it_dir


def run_measured(cmd):
    """Runs cmd; returns (seconds, peak RSS MiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        sys.exit('command failed (%d): %s\n%s' % (code, ' '.join(cmd), err.decode()))
    return seconds, usage.ru_maxrss / 1024.0, out.decode()


def main():
    binary = os.environ.get('GRAPHDUMP_BIN', 'graphdump')
    gib = float(os.environ.get('GRAPHDUMP_BENCH_GIB', '2'))
    file_mib = float(os.environ.get('GRAPHDUMP_BENCH_FILE_MIB', '16'))
    elements = int(file_mib * 2**20 / 4)
    files = max(1, int(round(gib * 1024 / file_mib)))
    tmp = tempfile.mkdtemp(prefix='graphdump_compare_bench_')
    try:
        t0 = time.perf_counter()
        a_dir = write_dump(os.path.join(tmp, 'a'), files, elements, perturb=True)
        b_dir = write_dump(os.path.join(tmp, 'b'), files, elements, perturb=False)
        print('generated 2 dumps of %d files x %.0f MiB (%.2f GiB each) in %.1f s' %
              (files, file_mib, files * file_mib / 1024, time.perf_counter() - t0))
        gd_s, gd_rss, gd_out = run_measured(
            [binary, 'compare', os.path.join(tmp, 'a'), os.path.join(tmp, 'b'), '-q',
             '--out', os.path.join(tmp, 'result.csv'), '--atol', '1e-6', '--rtol', '1e-5'])
        np_s, np_rss, np_out = run_measured(
            [sys.executable, '-c', NUMPY_COMPARE, a_dir, b_dir, '1e-6', '1e-5'])
        with open(os.path.join(tmp, 'result.csv')) as f:
            rows = sum(1 for _ in f) - 1
        total_gib = 2 * files * file_mib / 1024
        print('graphdump compare: %.2f s (%.2f GiB/s over both dumps), %d rows, peak RSS %.0f MiB'
              % (gd_s, total_gib / gd_s, rows, gd_rss))
        print('numpy script:      %.2f s (%.2f GiB/s), peak RSS %.0f MiB; %s'
              % (np_s, total_gib / np_s, np_rss, np_out.strip()))
        print('bench: compare_vs_numpy ratio=%.2f' % (np_s / gd_s))
        print('bench: compare_peak_rss graphdump_mib=%.0f numpy_mib=%.0f' % (gd_rss, np_rss))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
