"""demo-synthetic through the CLI: files, values and statistics read back with NumPy."""
import csv
import hashlib
import os

import numpy as np

import gdtest as t


def test_demo_synthetic(scratch):
    dump = os.path.join(scratch, "dump")
    cfg = t.write_config(os.path.join(scratch, "data_dump.json"), dump,
                         {"iteration": "0|2", "saved_data": "full",
                          "statistic_category": ["max", "min", "avg", "nan count", "md5", "l2norm"]})
    code, out, err = t.run("demo-synthetic", "--config", cfg, "--steps", "3", check=0)
    assert "dump: " + os.path.join(dump, "rank_0") in out, f"summary names the dump root: {out}"

    it2 = os.path.join(dump, "rank_0", "Net", "0", "2")
    assert not os.path.exists(os.path.join(dump, "rank_0", "Net", "0", "1")), \
        "iteration 1 not dumped"
    relu_in = t.files(it2 + "/ReLU.Default_relu-ReLU_ReLU-op2.0.0.*.input.0.DefaultFormat.float32.npy")
    relu_out = t.files(it2 + "/ReLU.Default_relu-ReLU_ReLU-op2.0.0.*.output.0.DefaultFormat.float32.npy")
    assert (len(relu_in), len(relu_out)) == (1, 1), "one ReLU input and output file"
    x, y = np.load(relu_in[0]), np.load(relu_out[0])
    assert np.array_equal(np.maximum(x, 0), y), "ReLU output is max(input, 0)"

    rows = list(csv.reader(open(os.path.join(it2, "statistic.csv"))))
    header = rows[0]
    assert (header[-6:] ==
            ["Max Value", "Min Value", "Avg Value", "NaN Count", "MD5", "L2Norm Value"]), \
        "statistic columns in configuration order"
    by_name = {(r[1], r[5], r[6]): r for r in rows[1:]}
    r = by_name[("Default_relu-ReLU_ReLU-op2", "output", "0")]
    assert r[-1] == "", "data rows end with a trailing comma"
    assert r[9] == "(4,16)", "shape column"
    assert abs(float(r[10]) - float(y.max())) <= 1e-5 * max(1, abs(y.max())), "max matches numpy"
    assert abs(float(r[12]) - float(y.astype(np.float64).mean())) <= 1e-5, "avg matches numpy"
    assert r[14] == hashlib.md5(y.tobytes()).hexdigest(), "md5 of the bytes"

    # Asynchronous dump of the same run writes the same tensors.
    dump2 = os.path.join(scratch, "dump2")
    cfg2 = t.write_config(os.path.join(scratch, "async.json"), dump2, {"iteration": "0|2"},
                          {"enable": False})
    t.run("demo-synthetic", "--config", cfg2, "--steps", "3", check=0)
    a = t.files(dump + "/rank_0/Net/0/2/*.npy")
    b = t.files(dump2 + "/rank_0/Net/0/2/*.npy")
    assert len(a) == len(b), "same number of files in sync and async"
    for fa, fb in zip(a, b):
        assert np.array_equal(np.load(fa), np.load(fb)), f"same values {os.path.basename(fa)}"

    # Bad configuration: exit 2 and a message naming the key.
    bad = t.write_config(os.path.join(scratch, "bad.json"), dump, {"iteration": "5-2"})
    code, out, err = t.run("demo-synthetic", "--config", bad)
    assert code == 2, "bad config exits 2"
    assert "common_dump_settings.iteration" in err, f"error names the key: {err}"
