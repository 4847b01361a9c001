"""examples/make_models.py teaches its usage and refuses bad arguments before writing anything:
--help prints the usage (exit 0); a missing directory, an option it does not know or an unknown
model name exit 2 with a message naming the problem."""
import contextlib
import io
import os

import gdmodels


def call(*args):
    """(exit code, stdout, stderr) of make_models.main."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            gdmodels.make_models.main(["make_models.py", *args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def test_usage_and_bad_arguments(scratch):
    code, out, _ = call("--help")
    assert code == 0, "--help exit code"
    assert "usage: .venv/bin/python examples/make_models.py OUT_DIR [NAME...]" in out, \
        f"--help prints the usage: {out[:200]!r}"
    assert "demo_alexnet" in out, "--help lists the models"
    assert not os.path.exists("--help"), "--help is not taken for a directory"

    code, _, err = call()
    assert code == 2, "no arguments: exit code"
    assert err.startswith("make_models.py: missing OUT_DIR"), f"no arguments: {err!r}"

    code, _, err = call("-j")
    assert code == 2, "unknown option: exit code"
    assert err.startswith("make_models.py: unknown option '-j'"), f"option: {err!r}"

    out_dir = os.path.join(scratch, "models")
    code, _, err = call(out_dir, "mlp", "resnet50")
    assert code == 2, "unknown model: exit code"
    assert err.startswith("make_models.py: unknown model 'resnet50'; known: alexnet,"), \
        f"unknown model: {err!r}"
    assert not os.path.exists(out_dir), "nothing written for a bad model list"
