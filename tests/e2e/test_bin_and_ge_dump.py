"""file_format "bin" and the GE dialect through a real session run (demo-synthetic):
convert of the .bin dump equals the .npy dump of the same run; the GE layout and selection."""
import glob
import json
import os
import re

import numpy as np

import gdtest as t


def test_bin_and_ge_dump(scratch):
    npy_dump, bin_dump = os.path.join(scratch, "npy"), os.path.join(scratch, "bin")
    common = {"iteration": "1", "input_output": 0}
    t.write_config(os.path.join(scratch, "npy.json"), npy_dump, common)
    t.write_config(os.path.join(scratch, "bin.json"), bin_dump, dict(common, file_format="bin"))
    summaries = {}
    for name in ("npy", "bin"):
        _, summaries[name], _ = t.run("demo-synthetic", "--config",
                                      os.path.join(scratch, name + ".json"), "--steps", "2", check=0)
    # The summary counts the bytes of the .bin files too (it used to count only .npy files).
    dumped = sum(os.path.getsize(f) for f in t.files(bin_dump + "/rank_0/Net/**/*")
                 if os.path.isfile(f))  # iteration 1 and constants/
    assert f"14 files, {dumped} bytes" in summaries["bin"], \
        f"bin dump summary: {dumped} bytes on disk: {summaries['bin']}"

    bin_files = [f for f in t.files(bin_dump + "/rank_0/Net/0/1/*") if not f.endswith(".npy")]
    assert len(bin_files) == 9, "one .bin file per kernel"
    assert all(re.search(r"\.0\.0\.\d{16}$", f) for f in bin_files), \
        "bin names end in task.stream.timestamp"
    converted = os.path.join(scratch, "converted")
    t.run("convert", *bin_files, "-o", converted, check=0)

    key = lambda f: re.sub(r"\.\d{16}\.", ".T.", os.path.basename(f))
    npy_files = [f for f in t.files(npy_dump + "/rank_0/Net/0/1/*.npy") if "/Parameter." not in f]
    assert len(npy_files) == 25, "kernel tensors in the npy dump"
    conv = {re.sub(r"\.\d{16}\.", ".T.", os.path.basename(f)): f for f in t.files(converted + "/*.npy")}
    for f in npy_files:
        # npy: {type}.{name}.0.0.T.{io}.{slot}.DefaultFormat.{dtype}.npy -> convert: {type}.{name}.0.0.T.{io}.{slot}.npy
        k = re.sub(r"\.DefaultFormat\.[a-z0-9]+\.npy$", ".npy", key(f))
        assert k in conv, f"converted file for {k}"
        a, b = np.load(f), np.load(conv[k])
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), \
            f"bin->convert equals npy for {k}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"

    # GE / TF-adapter dialect.
    def ge_demo_dump(name):
        """Runs demo-synthetic with a GE-dialect configuration (steps 0 and 2, two kernels);
        returns the dump path."""
        dump = os.path.join(scratch, name)
        cfg = os.path.join(scratch, name + ".json")
        with open(cfg, "w") as f:
            json.dump({"dump": {"enable_dump": True, "dump_path": dump, "dump_step": "0|2",
                                "dump_mode": "all",
                                "dump_layer": "Default/fc1-Dense/MatMul-op0 ReLU-op2"}}, f)
        t.run("demo-synthetic", "--config", cfg, "--steps", "3", check=0)
        return dump

    ge_dump = ge_demo_dump("ge")
    sessions = glob.glob(ge_dump + "/*")
    assert len(sessions) == 1, "one session directory"
    assert re.fullmatch(r"\d{14}", os.path.basename(sessions[0])) is not None, \
        f"session directory is YYYYMMDDhhmmss: {sessions}"
    model = os.path.join(sessions[0], "0", "synthetic_mlp", "0")
    assert sorted(os.listdir(model)) == ["0", "2"], "dump_step selects steps 0 and 2"
    names = sorted(re.sub(r"\.\d{16}$", "", n) for n in os.listdir(os.path.join(model, "2")))
    assert (names ==
            ["MatMul.Default_fc1-Dense_MatMul-op0.0.0", "ReLU.Default_relu-ReLU_ReLU-op2.0.0"]), \
        "dump_layer selects two kernels; no parameter or constant files"
    out = os.path.join(scratch, "ge_conv")
    t.run("convert", os.path.join(model, "2"), "-o", out, check=0)
    assert len(t.files(out + "/**/*.npy")) == 5, "MatMul 2 inputs + 1 output, ReLU 1 + 1"

    # ls and compare read GE-layout dumps (raw dump files) and convert's output directly.
    code, ls_out, err = t.run("ls", ge_dump, "--json", check=0)
    graph = json.loads(ls_out)["ranks"][0]["graphs"][0]
    assert ((graph["net_name"], [i["iteration"] for i in graph["iterations"]]) ==
            ("synthetic_mlp", [0, 2])), "ls: model name and data_index of the GE layout"
    assert ([(i["kernels"], i["tensors"]) for i in graph["iterations"]] ==
            [(2, 5), (2, 5)]), "ls: 2 kernels, 5 tensors per step"
    assert all(i["bytes"] > 0 for i in graph["iterations"]), "ls: bytes of the dump files"
    code, ls_out, err = t.run("ls", converted, "--json", check=0)
    it = json.loads(ls_out)["ranks"][0]["graphs"][0]["iterations"][0]
    assert (it["kernels"], it["tensors"]) == (9, 25), "ls reads convert's output directory"
    ge_same = ge_demo_dump("ge_same")
    code, cmp_out, err = t.run("compare", ge_dump, ge_same)
    assert code == 0, f"identical GE dumps compare equal: {cmp_out[-600:]} {err[-300:]}"
    ge_bad = os.path.join(scratch, "ge_bad")
    bad_cfg = os.path.join(scratch, "ge_bad.json")
    with open(bad_cfg, "w") as f:
        json.dump({"dump": {"enable_dump": True, "dump_path": ge_bad, "dump_step": "0|2",
                            "dump_mode": "all",
                            "dump_layer": "Default/fc1-Dense/MatMul-op0 ReLU-op2"}}, f)
    t.run("demo-synthetic", "--config", bad_cfg, "--steps", "3", "--perturb-kernel", "2",
          "--perturb", "0.5", "--fault-iteration", "2", check=0)
    code, cmp_out, err = t.run("compare", ge_dump, ge_bad, "--json")
    assert code == 1, "a perturbed GE dump fails the comparison"
    assert "ReLU-op2" in cmp_out, f"the perturbed ReLU is reported: {cmp_out[:600]}"
    code, cmp_text, err = t.run("compare", ge_dump, ge_bad)
    assert re.search(r"^  error   it 2 Default_relu-ReLU_ReLU-op2: ", cmp_text, re.M), \
        f"text report: no execution order number for a GE dump (it has none): {cmp_text}"

    disabled = os.path.join(scratch, "off.json")
    with open(disabled, "w") as f:
        json.dump({"dump": {"enable_dump": False, "dump_path": os.path.join(scratch, "off")}}, f)
    code, out_text, err = t.run("demo-synthetic", "--config", disabled, check=0)
    assert not os.path.exists(os.path.join(scratch, "off")), "enable_dump false writes nothing"
