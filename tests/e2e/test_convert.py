"""graphdump convert against an independent generator (tests/python/make_ascend_dump.py).

Every device format, several shapes (channels not a multiple of C0, N not a multiple of 16),
float16, int8 (C0 = 32), bfloat16 and float32: convert must reproduce the generator's host
tensors exactly, and its device tensors without -f. Corrupt files must be rejected with an
error naming the file and the field.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

BIN = os.environ["GRAPHDUMP_BIN"]
SRC = os.environ["GRAPHDUMP_SOURCE_DIR"]
GEN = os.path.join(SRC, "tests", "python", "make_ascend_dump.py")


def run(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def resolve(directory, listing_name):
    """{logical name: path}, long names mapped back through the directory's listing file."""
    mapping = {}
    listing = os.path.join(directory, listing_name)
    if os.path.exists(listing):
        for line in open(listing):
            short, _, name = line.rstrip("\n").partition(",")
            mapping[short] = name
    files = {}
    for f in os.listdir(directory):
        if f.endswith(".npy"):
            files[mapping.get(f, f)] = os.path.join(directory, f)
    return files


def compare_dirs(expected_dir, actual_dir):
    expected = resolve(expected_dir, "long_names.csv")
    actual = resolve(actual_dir, "mapping.csv")
    assert sorted(expected) == sorted(actual), (
        "file sets differ:\n missing: %s\n extra: %s" % (
            sorted(set(expected) - set(actual)), sorted(set(actual) - set(expected))))
    for name, path in expected.items():
        want = np.load(path)
        got = np.load(actual[name])
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        assert got.tobytes() == want.tobytes(), "%s: values differ" % name
    return len(expected)


@pytest.fixture(scope="module")
def tmp(module_scratch):
    """The generator's dump (with corrupt files and the expected conversions), made once."""
    subprocess.run([sys.executable, GEN, module_scratch, "--corrupt"], check=True)
    return module_scratch


def test_host_conversion_matches_the_generator(tmp):
    dump = os.path.join(tmp, "dump")
    rc, out = run("convert", dump, "-o", os.path.join(tmp, "host"), "-f", "NCHW", "-j", "3")
    assert rc == 0, out
    assert "no conversion from FRACTAL_ZZ" in out, out
    n = compare_dirs(os.path.join(tmp, "expected_host"), os.path.join(tmp, "host"))
    assert n >= 28, n
    assert os.path.exists(os.path.join(tmp, "host", "mapping.csv"))


def test_device_conversion_matches_the_generator(tmp):
    dump = os.path.join(tmp, "dump")
    rc, out = run("convert", dump, "-o", os.path.join(tmp, "device"))
    assert rc == 0, out
    compare_dirs(os.path.join(tmp, "expected_device"), os.path.join(tmp, "device"))


def test_one_file_named_directly(tmp):
    # One file named directly, -f ND, one thread.
    dump = os.path.join(tmp, "dump")
    one = [f for f in sorted(os.listdir(dump)) if f.startswith("MatMul")][0]
    rc, out = run("convert", os.path.join(dump, one), "-o", os.path.join(tmp, "one"),
                  "-f", "nd", "-j", "1")
    assert rc == 0, out
    got = sorted(os.listdir(os.path.join(tmp, "one")))
    assert got and all(f.startswith(one + ".") for f in got), got


def test_corrupt_files_name_the_file_and_field(tmp):
    # Corrupt files: exit 3, the error names the file and the field.
    for line in open(os.path.join(tmp, "corrupt.txt")):
        name, expect = line.rstrip("\n").split(" ", 1)
        rc, out = run("convert", os.path.join(tmp, "corrupt", name), "-o",
                      os.path.join(tmp, "bad"))
        assert rc == 3, (name, rc, out)
        assert name in out and expect in out, (name, expect, out)


def test_usage_errors(tmp):
    dump = os.path.join(tmp, "dump")
    rc, out = run("convert", dump, "-o", os.path.join(tmp, "x"), "-f", "NHWC")
    assert rc == 2 and "NHWC" in out and "NCHW" in out, out
    rc, out = run("convert", os.path.join(tmp, "missing"), "-o", os.path.join(tmp, "x"))
    assert rc == 2 and "missing" in out, out
    # An -o that cannot be a directory: one error naming it, before any file is read.
    blocker = os.path.join(tmp, "a_file")
    open(blocker, "w").close()
    for target in (blocker, os.path.join(blocker, "sub")):
        rc, out = run("convert", dump, "-o", target, "-f", "NCHW")
        assert rc == 2 and "-o " + target in out, out
        assert blocker + " exists and is not a directory" in out, out
        assert len(out.strip().splitlines()) == 1, out
        assert "converted" not in out, out
    rc, out = run("convert", "--help")
    assert rc == 0 and "Examples" in out, out
