"""`graphdump train` says when the loss becomes NaN (the step, and the command that finds the
first bad kernel), and --dump-path replaces the configuration's path (checked as the
configuration's own path is; it needs a configuration)."""
import os
import sys

import numpy as np
import pytest

import gdmodels
import gdtest


@pytest.fixture(scope="module")
def setup():
    """(tmp, model, data arguments, configuration): inputs whose first element is NaN."""
    tmp = gdtest.temp_dir()
    model = gdmodels.model_path("small_cnn")
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    np.save(os.path.join(tmp, "x.npy"), x)
    np.save(os.path.join(tmp, "y.npy"), np.array([0, 1]))
    data = ["--data", os.path.join(tmp, "x.npy"), "--labels", os.path.join(tmp, "y.npy")]
    config = gdtest.write_config(os.path.join(tmp, "d.json"), os.path.join(tmp, "in_config"),
                                 {"saved_data": "statistic"})
    yield tmp, model, data, config
    gdtest.cleanup(tmp)


def test_nan_loss_warning_names_step_and_command(setup):
    tmp, model, data, config = setup
    other = os.path.join(tmp, "elsewhere")
    code, out, err = gdtest.run("train", model, *data, "--steps", 3, "--config", config,
                                "--dump-path", other)
    assert code == 0, f"a NaN loss does not stop training: exit {code}\n{err}"
    assert (os.path.isdir(os.path.join(other, "rank_0")) and
            not os.path.exists(os.path.join(tmp, "in_config"))), (
        "--dump-path replaces the configuration's path")
    assert err.count("the loss is NaN") == 1, f"one warning, at the first NaN:\n{err}"
    assert (f"the loss is NaN at step 1 (iteration 0): graphdump watch {other}/rank_0 "
            "--check nan,inf" in err), f"the warning names the step and the command:\n{err}"
    code, out, _ = gdtest.run("watch", other, "--check", "nan", "-q")
    assert code == 1 and "first hit: Default/conv1-Conv2d/conv2d-op0" in out, (
        f"the suggested command finds the first NaN kernel:\n{out}")


def test_nan_loss_without_dump_says_how_to_get_one(setup):
    _, model, data, _ = setup
    code, _, err = gdtest.run("train", model, *data, "--steps", 1)
    assert "the loss is NaN at step 1: run again with a configuration" in err, (
        f"without a dump the warning says how to get one:\n{err}")


@pytest.mark.parametrize("args, words", [
    (["--dump-path", "relative/dir", "--config", "CONFIG"],
     "--dump-path: Dump path only support absolute path"),
    (["--dump-path", "/tmp/a b", "--config", "CONFIG"],
     "--dump-path: Dump path only support alphabets"),
    (["--dump-path", "ELSEWHERE"], "--dump-path replaces the path of a configuration"),
])
def test_bad_dump_path_is_a_usage_error(setup, args, words):
    tmp, model, data, config = setup
    places = {"CONFIG": config, "ELSEWHERE": os.path.join(tmp, "elsewhere")}
    args = [places.get(a, a) for a in args]
    code, _, err = gdtest.run("train", model, *data, "--steps", 1, *args)
    assert code == 2 and words in err, f"{args}: exit 2 with '{words}': {code}\n{err}"


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
