"""One run per dump directory (docs/layout.md): a second run into a path that holds a dump is
refused and leaves the earlier dump as it was; --overwrite replaces it; a run that fails leaves
.dump_metadata/INCOMPLETE saying why; and a MindSpore dump holding two runs is named as such by
the analysis commands."""
import hashlib
import os
import sys

import numpy as np
import pytest

import gdmodels
import gdtest


def snapshot(root):
    """{relative path: sha256} of every file below root."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def iterations(dump):
    return sorted(d for d in os.listdir(os.path.join(dump, "rank_0", "net", "0")) if d.isdigit())


@pytest.fixture(scope="module")
def first(module_scratch):
    """The first run into `dump`: its exit status and stderr, and a snapshot of its files."""
    model = gdmodels.model_path("small_cnn")
    dump = os.path.join(module_scratch, "dump")
    config = gdtest.write_config(os.path.join(module_scratch, "d.json"), dump,
                                 {"net_name": "net", "saved_data": "full"})
    shape = ["--input-shape", "2x3x16x16"]
    code, _, err = gdtest.run("run", model, *shape, "--steps", 3, "--config", config)
    before = snapshot(dump)
    script = os.path.join(module_scratch, "user.py")
    with open(script, "w") as f:
        f.write("import torch\n"
                f"m = torch.jit.load({model!r})\n"
                "print(float(m(torch.zeros(2, 3, 16, 16)).sum()))\n")
    return dict(model=model, dump=dump, config=config, shape=shape, code=code, err=err,
                before=before, script=script)


def test_first_run_dumps(first):
    dump, code, err = first["dump"], first["code"], first["err"]
    assert code == 0, f"first run: {err}"
    assert iterations(dump) == ["0", "1", "2"], "first run: three iterations"
    assert not os.path.exists(os.path.join(dump, "rank_0", ".dump_metadata", "INCOMPLETE")), (
        "a clean run removes INCOMPLETE")


def test_second_run_is_refused(first):
    model, dump, config, shape, before = (first[k] for k in
                                          ("model", "dump", "config", "shape", "before"))
    # The second run is refused before it runs a step, naming the directory and the ways out.
    code, out, err = gdtest.run("run", model, *shape, "--steps", 1, "--config", config)
    rank_dir = os.path.join(dump, "rank_0")
    assert code == 2, f"a second run into the same path is a usage error: {err}"
    for words in (f"{rank_dir} already exists: an earlier run dumped there",
                  "--overwrite", "--dump-path", "docs/layout.md"):
        assert words in err, f"the refusal says '{words}':\n{err}"
    assert "step 1/1" not in out, f"nothing ran:\n{out}"
    assert snapshot(dump) == before, "the earlier dump is untouched, byte for byte"


def test_train_and_python_refuse(first):
    model, dump, config, shape, before, script = (
        first[k] for k in ("model", "dump", "config", "shape", "before", "script"))
    # train refuses the same way; graphdump python too (ConfigError, exit 2).
    code, _, err = gdtest.run("train", model, *shape, "--steps", 1, "--config", config)
    assert code == 2 and "already exists" in err, f"train refuses: {code}\n{err}"
    code, _, err = gdtest.run("python", "--config", config, script)
    assert code == 2 and "graphdump python: error:" in err and "already exists" in err, (
        f"graphdump python refuses: {code}\n{err}")
    # It suggests what graphdump python accepts, and nothing unrelated follows.
    assert "graphdump python --overwrite" in err and "--dump-path" not in err, (
        f"graphdump python suggests its own option:\n{err}")
    assert "so no kernel was dumped" not in err, (
        f"no warning about modules after the refusal:\n{err}")
    assert snapshot(dump) == before, "still untouched after train and python"


def test_overwrite_replaces_the_earlier_dump(first):
    model, dump, config, shape, script = (
        first[k] for k in ("model", "dump", "config", "shape", "script"))
    # --overwrite replaces the earlier dump: only the new run's iteration is there.
    code, _, err = gdtest.run("run", model, *shape, "--steps", 1, "--config", config,
                              "--overwrite")
    assert code == 0, f"--overwrite: {err}"
    assert iterations(dump) == ["0"], "--overwrite: the older run's iterations are gone"
    order = os.path.join(dump, "rank_0", "execution_order", "ms_global_execution_order_graph_0.csv")
    with open(order) as f:
        assert f.read().split() == ["0"], "--overwrite: the execution order is the new run's"
    code, _, err = gdtest.run("python", "--config", config, "--overwrite", script)
    assert code == 0, f"graphdump python --overwrite: {err}"


def test_failed_run_keeps_incomplete(module_scratch):
    # A run that fails mid-step keeps INCOMPLETE, saying why.
    failing = gdmodels.model_path("failing")
    fail_dump = os.path.join(module_scratch, "fail_dump")
    fail_config = gdtest.write_config(os.path.join(module_scratch, "f.json"), fail_dump,
                                      {"net_name": "net"})
    code, _, err = gdtest.run("run", failing, "--input-shape", "2x8", "--config", fail_config)
    assert code == 3, f"the failing model fails (a kernel error): {err}"
    marker = os.path.join(fail_dump, "rank_0", ".dump_metadata", "INCOMPLETE")
    assert os.path.isfile(marker), "a failed run leaves INCOMPLETE"
    with open(marker) as f:
        text = f.read()
    assert ("The run stopped with an error" in text and "step 1" in text and
            "mat1 and mat2 shapes cannot be multiplied" in text), f"INCOMPLETE says why:\n{text}"


def test_raising_script_keeps_incomplete(module_scratch):
    model = gdmodels.model_path("small_cnn")
    # A script that raises leaves INCOMPLETE naming the exception.
    raising = os.path.join(module_scratch, "raising.py")
    with open(raising, "w") as f:
        f.write("import torch\n"
                f"m = torch.jit.load({model!r})\n"
                "m(torch.zeros(2, 3, 16, 16))\n"
                "raise RuntimeError('the data loader broke')\n")
    py_dump = os.path.join(module_scratch, "py_dump")
    py_config = gdtest.write_config(os.path.join(module_scratch, "p.json"), py_dump,
                                    {"net_name": "net"})
    code, _, err = gdtest.run("python", "--config", py_config, raising)
    assert code == 1, f"the script's exception is its exit status: {err}"
    marker = os.path.join(py_dump, "rank_0", ".dump_metadata", "INCOMPLETE")
    text = open(marker).read() if os.path.isfile(marker) else ""
    assert "RuntimeError: the data loader broke" in text, f"INCOMPLETE names it:\n{text}"


def test_mixed_runs_are_named(module_scratch, first):
    # A MindSpore dump (no graphdump config.json) with two files of one tensor in an iteration:
    # two runs mixed; ls and watch say so.
    ms = os.path.join(module_scratch, "ms", "rank_0", "net", "0", "0")
    os.makedirs(ms)
    for ts in (1700000000000001, 1700000000000002):
        np.save(os.path.join(ms, f"Add.Default_Add-op1.0.0.{ts}.output.0.DefaultFormat.float32.npy"),
                np.ones(4, np.float32))
    for command in (["ls"], ["watch", "--check", "nan"]):
        code, _, err = gdtest.run(command[0], os.path.join(module_scratch, "ms"), *command[1:])
        assert ("holds files of more than one run (Default_Add-op1 has two files for "
                "output 0)" in err and "docs/layout.md" in err), (
            f"{command[0]} names the mixed runs:\n{err}")
    # graphdump's own dumps are one run each: no such warning on the dump above.
    code, _, err = gdtest.run("ls", first["dump"])
    assert "more than one run" not in err, f"no warning on one run:\n{err}"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
