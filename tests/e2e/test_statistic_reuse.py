"""saved_data "statistic" reuses the statistics of bytes already reduced in a step (a kernel's
output read again as the next kernel's input, a weight read by several kernels, the copy of an
input taken before an in-place kernel). Reused rows must equal rows computed from the bytes:
the same training with saved_data "full" (every row computed while writing the .npy files,
nothing reused) gives the same statistic.csv, value for value. Covers in-place ReLU, Adam's
state, and the gradients a 2-rank AllReduce rewrites through raw pointers."""
import csv
import os

import numpy as np

import gdmodels
import gdtest

CATEGORIES = ["max", "min", "avg", "l2norm"]


def rows(root):
    """{iteration dir: [row without the timestamp]} for every statistic.csv under `root`."""
    out = {}
    for path in gdtest.files(os.path.join(root, "**", "statistic.csv")):
        with open(path) as f:
            table = list(csv.reader(f))
        gdtest.expect(len(table) > 1, f"{path}: rows")
        out[os.path.relpath(os.path.dirname(path), root)] = [r[:4] + r[5:] for r in table[1:]]
    return out


def train(tmp, name, saved, args):
    cfg = gdtest.write_config(os.path.join(tmp, name + ".json"), os.path.join(tmp, name),
                              {"saved_data": saved, "statistic_category": CATEGORIES})
    gdtest.run("train", *args, "--config", cfg, env=gdmodels.env_one_thread(), check=0)
    return rows(os.path.join(tmp, name))


def compare(label, reused, computed):
    gdtest.expect_eq(sorted(reused), sorted(computed), f"{label}: iteration directories")
    for it in computed:
        a, b = reused.get(it, []), computed[it]
        gdtest.expect_eq(len(a), len(b), f"{label} {it}: row count")
        bad = [(x, y) for x, y in zip(a, b) if x != y]
        gdtest.expect(not bad, f"{label} {it}: {len(bad)} rows differ, first: {bad[:1]}")


def main():
    tmp = gdtest.temp_dir()
    try:
        rng = np.random.default_rng(5)

        def data(name, shape, classes):
            np.save(os.path.join(tmp, name + "_x.npy"), rng.standard_normal(shape).astype(np.float32))
            np.save(os.path.join(tmp, name + "_y.npy"),
                    rng.integers(0, classes, size=shape[0]).astype(np.int64))
            return ["--data", os.path.join(tmp, name + "_x.npy"), "--labels",
                    os.path.join(tmp, name + "_y.npy"), "--steps", "3"]

        alexnet = [gdmodels.model_path("demo_alexnet"), *data("a", (8, 3, 64, 64), 10),
                   "--classes", "10", "--optimizer", "adam"]
        reused = train(tmp, "stat", "statistic", alexnet)
        compare("alexnet adam", reused, train(tmp, "full", "full", alexnet))
        relu_inputs = [r for it in reused.values() for r in it
                       if r[0] == "relu_" and r[4] == "input"]
        gdtest.expect(len(relu_inputs) > 0, "in-place relu_ inputs are in the statistics")

        ranks = [gdmodels.model_path("small_cnn"), *data("s", (8, 3, 16, 16), 5), "--nproc", "2"]
        reused = train(tmp, "stat2", "statistic", ranks)
        computed = train(tmp, "full2", "full", ranks)
        compare("2 ranks", reused, computed)
        gdtest.expect(any(r[0] == "AllReduce" for it in computed.values() for r in it),
                      "AllReduce kernels are in the statistics")
    finally:
        gdtest.cleanup(tmp)
    gdtest.finish()


if __name__ == "__main__":
    main()
