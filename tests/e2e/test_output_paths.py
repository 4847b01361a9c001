"""Output files are written only to regular files or new paths (docs/reliability.md): compare
--out and report -o replaced a FIFO, a symbolic link or (as root) a device node such as
/dev/full with a regular file. Now compare --out, report -o, run --save-output, train
--save-model and convert's .npy files refuse them with exit 2, naming the path and what was
found, and leave them as they were. convert also says when it skips a FIFO named like a dump
file."""
import os
import stat
import sys

import numpy as np
import pytest

import analysis_dumps as d
import gdmodels
import gdtest as t

sys.path.insert(0, os.path.join(t.SOURCE_DIR, "tests", "python"))
import make_ascend_dump  # noqa: E402  (the DumpData message, compiled with protoc)

RULE = ", not a regular file; graphdump writes only to regular files or new paths (remove it, " \
       "or name another path)"
ENV = gdmodels.env_one_thread()


def temporaries(directory):
    return [f for f in os.listdir(directory) if ".tmp." in f]


def ascend_dump_file(directory, name="Add.Default_Add-op1.0.0.1700"):
    pb = make_ascend_dump.load_proto_module()
    dump = pb.DumpData(version="2.0", op_name="Default/Add-op1")
    o = dump.output.add(data_type=1, format=2, size=16)  # FLOAT, ND
    o.shape.dim.extend([4])
    o.original_shape.dim.extend([4])
    header = dump.SerializeToString()
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header +
                np.arange(4, dtype=np.float32).tobytes())
    return name


@pytest.fixture(scope="module")
def places(module_scratch):
    """Two dumps to compare, and in out/ a FIFO, a file and a symbolic link to it."""
    a, b = os.path.join(module_scratch, "a"), os.path.join(module_scratch, "b")
    net = d.simple_net(n=3)
    d.write_dump(a, {0: net})
    d.write_dump(b, {0: net})
    out = os.path.join(module_scratch, "out")
    os.makedirs(out)
    fifo = os.path.join(out, "fifo")
    os.mkfifo(fifo)
    target = os.path.join(out, "target.txt")
    with open(target, "w") as f:
        f.write("keep\n")
    link = os.path.join(out, "link")
    os.symlink(target, link)
    return dict(a=a, b=b, out=out, fifo=fifo, target=target, link=link)


def untouched(places):
    assert stat.S_ISFIFO(os.lstat(places["fifo"]).st_mode), "the FIFO is still a FIFO"
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode), "/dev/full is still a device"
    assert os.path.islink(places["link"]) and os.readlink(places["link"]) == places["target"], (
        "the link is still the link")
    with open(places["target"]) as f:
        assert f.read() == "keep\n", "the link's target is untouched"


@pytest.mark.parametrize("place, kind", [("fifo", "a FIFO"), ("/dev/full", "a character device"),
                                         ("link", "a symbolic link")])
@pytest.mark.parametrize("option", ["--out", "-o", "--save-output", "--save-model"])
def test_outputs_refuse_what_is_not_a_regular_file(places, place, kind, option):
    path = places.get(place, place)
    model, cnn = gdmodels.model_path("mlp"), gdmodels.model_path("small_cnn")
    args = {"--out": ["compare", places["a"], places["b"], "--out", path],
            "-o": ["report", places["a"], "-o", path],
            "--save-output": ["run", model, "--input-shape", "2x12", "--save-output", path],
            "--save-model": ["train", cnn, "--input-shape", "2x3x16x16", "--classes", "3",
                             "--steps", "1", "--save-model", path]}[option]
    code, stdout, err = t.run(*args, env=ENV, timeout=300)
    what = f"{args[0]} {option} {kind}"
    assert code == 2, f"{what}: refused: {err[-300:]}"
    assert f"{option} {path}: it is {kind}{RULE}" in err, (
        f"{what}: the error names the path and what it is: {err[-300:]}")
    assert "step 1/" not in stdout, f"{what}: refused before the work: {stdout[-200:]}"
    untouched(places)
    assert temporaries(places["out"]) == [], "no temporary is left"


@pytest.fixture(scope="module")
def ascend(module_scratch):
    """(a directory with one Ascend dump file, its name)."""
    source = os.path.join(module_scratch, "ascend")
    return source, ascend_dump_file(source)


@pytest.mark.parametrize("kind", ["a FIFO", "a symbolic link"])
def test_convert_refuses_what_is_not_a_regular_file(module_scratch, places, ascend, kind):
    # convert: a FIFO or a link under a .npy name in -o is refused, and left as it is.
    source, name = ascend
    converted = os.path.join(module_scratch, "npy_" + kind.split()[-1])
    os.makedirs(converted)
    npy = os.path.join(converted, name + ".output.0.npy")
    if kind == "a FIFO":
        os.mkfifo(npy)
    else:
        os.symlink(places["target"], npy)
    code, stdout, err = t.run("convert", source, "-o", converted, "-q")
    assert code == 2, f"convert over {kind}: refused: {err[-300:]}"
    assert f"cannot write {npy}: it is {kind}{RULE}" in err, (
        f"convert over {kind}: the error names the file: {err[-300:]}")
    assert (stat.S_ISFIFO(os.lstat(npy).st_mode) if kind == "a FIFO"
            else os.path.islink(npy)), f"convert over {kind}: left as it was"
    assert temporaries(converted) == [], f"convert over {kind}: no temporary is left"
    with open(places["target"]) as f:
        assert f.read() == "keep\n", "the link's target is untouched by convert"


def test_convert_says_which_fifo_it_skips(module_scratch, ascend):
    # convert skipped a FIFO named like a dump file without a word.
    source, name = ascend
    planted = os.path.join(source, "Mul.Default_Mul-op2.0.0.1701")
    os.mkfifo(planted)
    converted = os.path.join(module_scratch, "npy_skip")
    code, stdout, err = t.run("convert", source, "-o", converted, "-q")
    assert code == 0, f"convert converts the rest: {err[-300:]}"
    assert f"graphdump convert: skipped {planted}: it is a FIFO, not a regular file" in err, (
        f"and says what it skipped: {err[-300:]}")
    assert sorted(os.listdir(converted)) == [name + ".output.0.npy"], "the dump file converted"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
