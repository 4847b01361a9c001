"""examples/make_models.py teaches its usage and refuses bad arguments before writing anything:
--help prints the usage (exit 0); a missing directory, an option it does not know or an unknown
model name exit 2 with a message naming the problem."""
import contextlib
import io
import os

import gdmodels
import gdtest


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


def main():
    tmp = gdtest.temp_dir()
    try:
        code, out, _ = call("--help")
        gdtest.expect_eq(code, 0, "--help exit code")
        gdtest.expect("usage: /usr/bin/python3 examples/make_models.py OUT_DIR [NAME...]" in out,
                      f"--help prints the usage: {out[:200]!r}")
        gdtest.expect("demo_alexnet" in out, "--help lists the models")
        gdtest.expect(not os.path.exists("--help"), "--help is not taken for a directory")

        code, _, err = call()
        gdtest.expect_eq(code, 2, "no arguments: exit code")
        gdtest.expect(err.startswith("make_models.py: missing OUT_DIR"), f"no arguments: {err!r}")

        code, _, err = call("-j")
        gdtest.expect_eq(code, 2, "unknown option: exit code")
        gdtest.expect(err.startswith("make_models.py: unknown option '-j'"), f"option: {err!r}")

        out_dir = os.path.join(tmp, "models")
        code, _, err = call(out_dir, "mlp", "resnet50")
        gdtest.expect_eq(code, 2, "unknown model: exit code")
        gdtest.expect(err.startswith("make_models.py: unknown model 'resnet50'; known: alexnet,"),
                      f"unknown model: {err!r}")
        gdtest.expect(not os.path.exists(out_dir), "nothing written for a bad model list")
    finally:
        gdtest.cleanup(tmp)
    gdtest.finish()


if __name__ == "__main__":
    main()
