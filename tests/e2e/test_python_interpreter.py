"""Which Python `graphdump python` and `graphdump hunt` run the script with (docs/python.md):
`--python PATH` when given before the script, else the python3 beside the graphdump executable
(test_install.py: an install into an environment), else the Python of the build. A --python
that is not an executable file is a usage error naming it, with nothing run; a --python or
--nproc after the script is the script's own."""
import json
import os
import re
import subprocess

import pytest

import gdtest as t

# Prints what it was run with, as JSON, and leaves a file to show that it ran.
SCRIPT = '''import json
import os
import sys

open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ran." + os.environ.get("RANK", "0")),
     "w").close()
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix, "argv": sys.argv[1:]}))
'''


@pytest.fixture(scope="module")
def work(module_scratch):
    with open(os.path.join(module_scratch, "where.py"), "w") as f:
        f.write(SCRIPT)
    return module_scratch


@pytest.fixture(scope="module")
def other_env(module_scratch):
    """A virtual environment other than the build's (with torch through a .pth file)."""
    env = os.path.join(module_scratch, "other")
    t.make_env(env)
    return env


def prefix_of(python):
    p = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True,
                       text=True)
    assert p.returncode == 0, f"{python}: {p.stderr}"
    return p.stdout.strip()


def ran(stdout):
    """What each run of the script printed (a line per rank, maybe prefixed [rank k])."""
    found = [re.fullmatch(r"(\[rank \d+\] )?(\{.*\})", line) for line in stdout.splitlines()]
    return [json.loads(m.group(2)) for m in found if m]


def same(path, other):
    return os.path.realpath(path) == os.path.realpath(other)


def clear(work):
    for name in os.listdir(work):
        if name.startswith("ran."):
            os.unlink(os.path.join(work, name))


def test_default_is_the_build_python(work):
    clear(work)
    code, out, err = t.run("python", "where.py", cwd=work)
    assert code == 0, err
    [seen] = ran(out)
    assert seen["prefix"] == prefix_of(t.build_python()) and seen["argv"] == [], \
        f"the build's Python ({t.build_python()}) ran the script: {seen}"


@pytest.mark.parametrize("form", ["separate", "equals"])
def test_python_option_runs_that_python(work, other_env, form):
    clear(work)
    python = os.path.join(other_env, "bin", "python")
    option = ["--python", python] if form == "separate" else [f"--python={python}"]
    # Among other options, before and after one that takes a value (--config's).
    config = t.write_config(os.path.join(work, "cfg.json"), os.path.join(work, "dump_" + form))
    code, out, err = t.run("python", "--config", config, *option, "--overwrite", "where.py",
                           "a", cwd=work)
    assert code == 0, err
    [seen] = ran(out)
    assert seen["executable"] == python and same(seen["prefix"], other_env) and \
        seen["argv"] == ["a"], f"--python {python} ran the script, without --python: {seen}"


def test_script_keeps_its_own_options(work, other_env):
    # After the script, --python and --nproc are the script's arguments, not graphdump's.
    clear(work)
    code, out, err = t.run("python", "--nproc", "2", "--python",
                           os.path.join(other_env, "bin", "python"), "where.py", "--python",
                           "x", "--nproc", "5", cwd=work)
    assert code == 0, err
    seen = ran(out)
    assert len(seen) == 2 and all(s["argv"] == ["--python", "x", "--nproc", "5"] and
                                  same(s["prefix"], other_env) for s in seen), \
        f"each of the 2 ranks ran with the other Python and its own arguments: {seen}\n{err}"
    assert {"ran.0", "ran.1"} <= set(os.listdir(work)), f"ranks 0 and 1 ran: {os.listdir(work)}"


@pytest.mark.parametrize("command", ["python", "hunt"])
@pytest.mark.parametrize("case", ["missing", "directory", "not executable", "no value"])
def test_bad_python_is_a_usage_error(work, command, case):
    clear(work)
    plain = os.path.join(work, "plain.txt")
    with open(plain, "w") as f:
        f.write("not a program\n")
    path = {"missing": os.path.join(work, "no", "python"), "directory": work,
            "not executable": plain, "no value": None}[case]
    # Without a value, --python ends the command line.
    args = ["--python", path, "where.py"] if path else ["--python"]
    code, out, err = t.run(command, *args, cwd=work)
    wanted = (f"graphdump {command}: error: --python '{path}' is not an executable file"
              if path else f"graphdump {command}: error: --python needs the path of a Python")
    assert code == 2 and wanted in err, f"{case}: exit 2 naming it: {code}\n{out}\n{err}"
    assert not [n for n in os.listdir(work) if n.startswith("ran.")], f"{case}: nothing ran"


def test_hunt_passes_run_with_its_python(work, other_env):
    # A script that calls no module: pass 1 runs it to its end, captures no iteration, and the
    # hunt says it has nothing to hunt (exit 3), not that it found no hit.
    clear(work)
    python = os.path.join(other_env, "bin", "python")
    code, out, err = t.run("hunt", "--python", python, "--dump-path",
                           os.path.join(work, "hunt"), "where.py", "b", cwd=work)
    seen = ran(out)
    said = out + err
    assert code == 3 and "captured no iteration" in said and "calls no module" in said, said
    assert seen and all(same(s["prefix"], other_env) and s["argv"] == ["b"] for s in seen), \
        f"hunt's pass ran the script with --python's Python: {code}\n{out}\n{err}"
