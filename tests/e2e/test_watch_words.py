"""watch reports only what the data proves (docs/analysis.md): counts from statistic.csv only
where it has a count column, infinities named by the tensor's own dtype, 'zero' not judging
constants and parameters, --first and --limit, and counts that add up."""
import os
import re
import sys

import numpy as np
import pytest

import analysis_dumps as ad
import gdtest


def kernel(name, out):
    return {"full_name": "Default/net-Net/" + name, "outputs": [out]}


def drop_column(csv_path, title):
    with open(csv_path) as f:
        lines = f.read().splitlines()
    header = lines[0].split(",")
    col = header.index(title)
    rows = []
    for line in lines:
        # the Shape field is quoted and holds commas: split around it
        pre, quoted, post = (line.split('"') + ["", ""])[:3] if '"' in line else (line, "", "")
        if quoted:
            fields = pre.split(",")[:-1] + ['"' + quoted + '"'] + post.split(",")[1:]
        else:
            fields = line.split(",")
        del fields[col]
        rows.append(",".join(fields))
    with open(csv_path, "w") as f:
        f.write("\n".join(rows) + "\n")


NAN = np.full(1000, np.nan, np.float32)


def test_nan_counts_only_where_statistic_csv_counts(module_scratch):
    # Statistic-only dumps: with a NaN Count column the count is exact; without it, only what
    # max and min prove is said.
    counted = os.path.join(module_scratch, "counted")
    ad.write_dump(counted, {0: [kernel("mean-op7", NAN)]}, files=False, stats=True)
    code, out, _ = gdtest.run("watch", counted, "-q")
    assert code == 1 and "[nan] 1000 NaN of 1000 elements" in out, (
        f"a NaN Count column gives the exact count:\n{out}")

    uncounted = os.path.join(module_scratch, "uncounted")
    ad.write_dump(uncounted, {0: [kernel("mean-op7", NAN)]}, files=False, stats=True)
    drop_column(os.path.join(uncounted, "rank_0", "Net", "0", "0", "statistic.csv"), "NaN Count")
    code, out, _ = gdtest.run("watch", uncounted, "-q")
    assert (code == 1 and "[nan] max and min are NaN: at least one NaN of 1000 elements "
            "(statistic.csv has no NaN Count column)" in out), (
        f"without a count column watch says what max and min prove:\n{out}")
    assert not re.search(r"\b1 NaN of", out), f"no invented count:\n{out}"


def test_infinities_named_by_dtype(module_scratch):
    # Infinities by dtype: float32's own -Inf is not a float16 overflow; float16's Inf is one;
    # finite float32 values beyond 65504 are what would overflow in float16.
    x32 = np.ones(8, np.float32)
    x32[3] = -np.inf
    big = np.ones(8, np.float32)
    big[[1, 2]] = 7e4
    x16 = np.ones(8, np.float16)
    x16[0] = np.inf
    files = os.path.join(module_scratch, "files")
    ad.write_dump(files, {0: [kernel("log-op0", x32), kernel("mul-op1", big),
                              kernel("cast-op2", x16)]})
    code, out, _ = gdtest.run("watch", files, "--check", "overflow", "-q")
    assert ("log-op0 output 0: [overflow] 1 -Inf of 8 elements (infinite in float32 itself)"
            in out), (
        f"float32 -Inf is labelled as float32's:\n{out}")
    assert ("mul-op1 output 0: [overflow] 2 finite elements beyond the float16 range "
            "(|x| > 65504)" in out), (
        f"values beyond float16's range:\n{out}")
    assert "cast-op2 output 0: [overflow] 1 +Inf of 8 elements (float16 overflowed)" in out, (
        f"float16 Inf is an overflow:\n{out}")
    assert "outside the float16 range (|x| > 65504 or Inf)" not in out, (
        f"the old blanket label is gone:\n{out}")


def test_zero_skips_constants_and_parameters(module_scratch):
    # zero: a kernel's all-zero output hits; a zero bias (parameter), a False constant and an
    # all-zero int64 index tensor do not.
    zeros = os.path.join(module_scratch, "zeros")
    rank = ad.write_dump(zeros, {0: [kernel("relu-op0", np.zeros(4, np.float32)),
                                     kernel("argmax-op1", np.zeros(4, np.int64))]},
                         parameters={0: {"fc.bias": np.zeros(3, np.float32)}})
    constants = os.path.join(rank, "Net", "0", "constants")
    os.makedirs(constants)
    np.save(os.path.join(constants, "Parameter.data-0.0.0.1700000000000001.output.0."
                         "DefaultFormat.bool.npy"), np.array(False))
    code, out, _ = gdtest.run("watch", zeros, "--check", "zero", "-q")
    hits = [line for line in out.splitlines() if "[zero]" in line and line.startswith("  ")]
    assert len(hits) == 1, f"one zero hit:\n{out}"
    assert "relu-op0 output 0: [zero] all 4 elements are zero" in out, (
        f"the kernel's zero output is the hit:\n{out}")


def test_limit_and_first(module_scratch):
    # A cascade: --limit caps the list; --first prints the first hit and what followed.
    cascade = os.path.join(module_scratch, "cascade")
    ad.write_dump(cascade, {0: [kernel("log-op%d" % i, NAN[:10]) for i in range(6)],
                            1: [kernel("log-op%d" % i, NAN[:10]) for i in range(6)]})
    code, out, _ = gdtest.run("watch", cascade, "--limit", "2", "-q")
    listed = [line for line in out.splitlines() if "[nan]" in line and line.startswith("  ")]
    assert len(listed) == 2, f"--limit 2 lists two hits:\n{out}"
    assert "... 10 more hit(s) (--limit 0 prints all; --first summarises them)" in out, (
        f"the rest is counted:\n{out}")
    code, out, _ = gdtest.run("watch", cascade, "--limit", "0", "-q")
    assert len([l for l in out.splitlines() if "[nan]" in l and l.startswith("  ")]) == 12, (
        f"--limit 0 lists all:\n{out}")
    code, out, _ = gdtest.run("watch", cascade, "--first", "-q")
    assert code == 1 and "first hit: Default/net-Net/log-op0" in out, (
        f"--first names the first hit:\n{out}")
    assert ("then: 11 more hit(s), 5 other kernel(s), iterations 0 to 1; next hit: "
            "Default/net-Net/log-op1, Default/net-Net/log-op2" in out), (
        f"--first summarises what followed:\n{out}")
    assert not any(l.startswith("  ->") for l in out.splitlines()), f"--first lists no hits:\n{out}"


def test_weight_checks_count_pairs(module_scratch):
    # Weight checks count the pairs they compared.
    weights = os.path.join(module_scratch, "weights")
    w0 = np.ones(4, np.float32)
    ad.write_dump(weights, {0: [kernel("add-op0", w0)], 1: [kernel("add-op0", w0)]},
                  parameters={0: {"w": w0}, 1: {"w": w0 * 1.5}})
    code, out, _ = gdtest.run("watch", weights, "--check", "weight-change:0.05", "-q")
    assert "0 tensors checked, 1 weight pairs compared, 1 hit(s)" in out, (
        f"the counts add up:\n{out}")


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
