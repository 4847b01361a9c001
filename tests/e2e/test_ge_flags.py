"""The GE / TF-adapter dialect given as run flags (docs/ascend.md): GE layout, step selection,
dump_mode, and graph plumbing (prim::, constants) never dumped; the files convert to .npy."""
import glob
import os
import re

import numpy as np

import gdmodels
import gdtest as t


def test_ge_flags(scratch):
    dump = os.path.join(scratch, "ge")
    model = gdmodels.model_path("small_cnn")
    t.run("run", model, "--input-shape", "2x3x16x16", "--steps", "3", "--enable-dump",
          "--dump-path", dump, "--dump-step", "0|2", "--dump-mode", "all",
          env=gdmodels.env_one_thread(), check=0)
    sessions = glob.glob(dump + "/*")
    assert len(sessions) == 1, "one YYYYMMDDhhmmss session directory"
    model_dir = os.path.join(sessions[0], "0", "small_cnn", "0")
    assert sorted(os.listdir(model_dir)) == ["0", "2"], "--dump-step 0|2"
    names = os.listdir(os.path.join(model_dir, "2"))
    assert len(names) > 3, f"kernels dumped: {names}"
    assert all(re.fullmatch(r"[^.]+\.[^.]+\.0\.0\.\d{16}", n) for n in names), \
        f"GE file names {{type}}.{{name}}.{{task}}.{{stream}}.{{timestamp}}: {names}"
    assert not any(n.split(".")[0].lower() in ("constant", "parameter", "data") or
                   n.startswith("prim") for n in names), f"no data/constant nodes: {names}"
    out = os.path.join(scratch, "npy")
    t.run("convert", os.path.join(model_dir, "2"), "-o", out, check=0)
    conv = [f for f in t.files(out + "/**/*.npy") if ".conv2d." in f or f.split("/")[-1].startswith("conv2d")]
    assert len(conv) >= 2, f"conv2d inputs and outputs converted: {conv}"
    for f in conv:
        assert np.isfinite(np.load(f)).all(), f"{f} loads"

    code, _, err = t.run("run", model, "--enable-dump", "--dump-path", dump, "--dump-mode", "some")
    assert code == 2, "a bad --dump-mode is a usage error"
    assert "dump_mode" in err and "some" in err, f"message names the option and value: {err}"
    cfg = t.write_config(os.path.join(scratch, "c.json"), os.path.join(scratch, "x"))
    code, _, err = t.run("run", model, "--enable-dump", "--dump-path", dump, "--config", cfg)
    assert code == 2, "--enable-dump with --config is a usage error"
    # The dialect's flags without --enable-dump would silently dump nothing: a usage error.
    # (--dump-path alone replaces a configuration's path: test_train_warnings_and_dump_path.)
    code, out, err = t.run("run", model, "--input-shape", "2x3x16x16", "--dump-path", dump,
                           "--dump-step", "1", "--dump-mode", "all")
    assert (code == 2 and "--dump-step, --dump-mode: the GE dialect's flags take effect only "
            "with --enable-dump" in err and "step 1" not in out), \
        f"GE flags without --enable-dump: exit {code}\n{out}{err}"
    # --set-dump marks modules for dump_mode 2 only; elsewhere it says so.
    for args, why in (([], "dump is off"), (["--config", cfg], "dump_mode is 0")):
        code, out, err = t.run("run", model, "--input-shape", "2x3x16x16", "--set-dump", "conv1",
                               *args, env=gdmodels.env_one_thread())
        assert code == 0 and f"warning: --set-dump has no effect: {why}" in err, \
            f"--set-dump {args}: exit {code}\n{err}"
