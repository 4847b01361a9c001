"""`graphdump train` says when the loss becomes NaN (the step, and the command that finds the
first bad kernel), and --dump-path replaces the configuration's path (checked as the
configuration's own path is; it needs a configuration)."""
import os

import numpy as np

import gdmodels
import gdtest

tmp = gdtest.temp_dir()
try:
    model = gdmodels.model_path("small_cnn")
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    np.save(os.path.join(tmp, "x.npy"), x)
    np.save(os.path.join(tmp, "y.npy"), np.array([0, 1]))
    data = ["--data", os.path.join(tmp, "x.npy"), "--labels", os.path.join(tmp, "y.npy")]
    config = gdtest.write_config(os.path.join(tmp, "d.json"), os.path.join(tmp, "in_config"),
                                 {"saved_data": "statistic"})
    other = os.path.join(tmp, "elsewhere")

    code, out, err = gdtest.run("train", model, *data, "--steps", 3, "--config", config,
                                "--dump-path", other)
    gdtest.expect_eq(code, 0, "a NaN loss does not stop training")
    gdtest.expect(os.path.isdir(os.path.join(other, "rank_0")) and
                  not os.path.exists(os.path.join(tmp, "in_config")),
                  "--dump-path replaces the configuration's path")
    gdtest.expect_eq(err.count("the loss is NaN"), 1, f"one warning, at the first NaN:\n{err}")
    gdtest.expect(f"the loss is NaN at step 1 (iteration 0): graphdump watch {other}/rank_0 "
                  "--check nan,inf" in err, f"the warning names the step and the command:\n{err}")
    code, out, _ = gdtest.run("watch", other, "--check", "nan", "-q")
    gdtest.expect(code == 1 and "first hit: Default/conv1-Conv2d/conv2d-op0" in out,
                  f"the suggested command finds the first NaN kernel:\n{out}")

    code, _, err = gdtest.run("train", model, *data, "--steps", 1)
    gdtest.expect("the loss is NaN at step 1: run again with a configuration" in err,
                  f"without a dump the warning says how to get one:\n{err}")

    for args, words in ((["--dump-path", "relative/dir", "--config", config],
                         "--dump-path: Dump path only support absolute path"),
                        (["--dump-path", "/tmp/a b", "--config", config],
                         "--dump-path: Dump path only support alphabets"),
                        (["--dump-path", other], "--dump-path replaces the path of a configuration")):
        code, _, err = gdtest.run("train", model, *data, "--steps", 1, *args)
        gdtest.expect(code == 2 and words in err, f"{args}: exit 2 with '{words}': {code}\n{err}")
finally:
    gdtest.cleanup(tmp)
gdtest.finish()
