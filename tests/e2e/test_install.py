"""graphdump installed as a user installs it (docs/README.md, "Install"), each run from outside
the repository with nothing of the build on any path:

- `make install`: `cmake --install` of the build into a scratch DESTDIR, prefix /usr/local.
  graphdump --version, graphdump run (graphdump-torch finds libtorch) and graphdump python (the
  installed package, the build's Python) work, and the package imports from
  lib/python3.N/site-packages.
- `make install` into a virtual environment's prefix: graphdump python runs the script with
  that environment's python3, the one beside the installed graphdump, not the build's.
- `pip install --no-build-isolation .` into a fresh virtual environment: the package lands in
  its site-packages, the executables in its bin/, and graphdump python runs a plain eager
  training step with the environment's python and dumps it.

Each environment is made fresh here (gdtest.make_env), but gets torch, and scikit-build-core,
the build backend pip needs with --no-build-isolation, from the Python running these tests
through a .pth file: installing torch==2.13.0 into each would take about 60 s and a 1.3 GB
download, and what is tested is graphdump's install, not torch's."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

import gdtest as t

PYTHONDIR = "lib/python3.%d/site-packages" % sys.version_info.minor
# The Python running the tests is the project's environment (.venv): no user has it on PATH.
_TEST_ENV_BIN = os.path.dirname(os.path.abspath(sys.executable))
CLEAN = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG",
                      "GRAPHDUMP_PYTHONPATH", "GRAPHDUMP_BIN", "VIRTUAL_ENV", "PYTHONHOME")}
CLEAN["PATH"] = ":".join(p for p in os.environ.get("PATH", "").split(":")
                         if p and os.path.abspath(p) != _TEST_ENV_BIN)
CLEAN["OMP_NUM_THREADS"] = "1"

# A plain eager training step, no torch.jit: one forward, backward and SGD step of a small MLP.
# Its last line says which Python ran it and where graphdump and torch were imported from.
SCRIPT = '''import json
import sys

import torch

import graphdump

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 1, 0])
loss = torch.nn.functional.cross_entropy(net(x), y)
loss.backward()
optimizer.step()
print(json.dumps({"executable": sys.executable, "prefix": sys.prefix,
                  "graphdump": graphdump.__file__, "torch": torch.__file__}))
'''


def run(command, cwd, env=None, timeout=600):
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env or CLEAN,
                          timeout=timeout)


def prefix_of(python):
    p = run([python, "-c", "import sys; print(sys.prefix)"], cwd="/")
    assert p.returncode == 0, f"{python}: {p.stderr}"
    return p.stdout.strip()


def check_files(prefix, site, what):
    for path in (os.path.join(prefix, "bin", "graphdump"),
                 os.path.join(prefix, "bin", "graphdump-torch")):
        assert os.path.isfile(path) and os.access(path, os.X_OK), f"{what}: installed {path}"
    for name in ("__init__.py", "__main__.py", "torch.py", "hunt_cli.py"):
        assert os.path.isfile(os.path.join(site, "graphdump", name)), \
            f"{what}: installed {site}/graphdump/{name}"
    assert any(n.startswith("_graphdump") and n.endswith(".so")
               for n in os.listdir(os.path.join(site, "graphdump"))), \
        f"{what}: installed the extension: {os.listdir(os.path.join(site, 'graphdump'))}"


def check_version(prefix, work, what):
    """graphdump --version of the installed executable; returns the version."""
    p = run([os.path.join(prefix, "bin", "graphdump"), "--version"], cwd=work)
    found = re.fullmatch(r"graphdump (\d+\.\d+\.\d+)\n", p.stdout)
    assert p.returncode == 0 and found, f"{what}: graphdump --version: {p.stdout}{p.stderr}"
    return found.group(1)


def check_torch_host(prefix, work, what):
    # run's help comes from graphdump-torch, which only starts if it finds libtorch*.so.
    p = run([os.path.join(prefix, "bin", "graphdump"), "run", "--help"], cwd=work)
    assert p.returncode == 0 and "graphdump run" in p.stdout and "--input-shape" in p.stdout, \
        f"{what}: graphdump run --help (graphdump-torch loads torch): {p.stdout}{p.stderr}"


def run_script(prefix, work, what, extra=()):
    """graphdump python --config CFG script.py with the installed graphdump, in `work`; checks
    that it dumped the forward, backward and optimizer kernels and returns what the script
    printed about itself."""
    script = os.path.join(work, "script.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    dump = os.path.join(work, "dump_" + what)
    config = t.write_config(os.path.join(work, what + ".json"), dump)
    p = run([os.path.join(prefix, "bin", "graphdump"), "python", *extra, "--config", config,
             script], cwd=work)
    assert p.returncode == 0, f"{what}: graphdump python: {p.returncode}\n{p.stdout}{p.stderr}"
    npy = t.files(os.path.join(dump, "**", "*.npy"))
    names = [os.path.basename(n) for n in npy]
    # {op_type}.{op_name}...: the forward linear, a gradient kernel, SGD's update kernel.
    assert any(n.startswith("linear.Default_") for n in names) and \
        any(".Gradients_Default_" in n for n in names) and \
        any(n.startswith("SGD.Default_optimizer-SGD_") for n in names), \
        f"{what}: dumped forward, backward and optimizer kernels: {names[:40]}"
    summary = re.search(r"graphdump: dump: (\d+) tensor files", p.stderr)
    assert summary and int(summary.group(1)) == len(npy), \
        f"{what}: the summary counts the {len(npy)} files: {p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_make_install(scratch):
    stage = os.path.join(scratch, "stage")
    p = subprocess.run(["cmake", "--install", t.BUILD_DIR, "--prefix", "/usr/local"],
                       env=dict(os.environ, DESTDIR=stage), capture_output=True, text=True)
    assert p.returncode == 0, f"cmake --install: {p.stdout}{p.stderr}"
    prefix = stage + "/usr/local"
    site = os.path.join(prefix, PYTHONDIR)
    check_files(prefix, site, "install")
    version = check_version(prefix, scratch, "install")
    check_torch_host(prefix, scratch, "install")
    # No python3 beside /usr/local/bin/graphdump: the script runs with the build's Python.
    ran = run_script(prefix, scratch, "install")
    assert ran["graphdump"] == os.path.join(site, "graphdump", "__init__.py"), \
        f"graphdump python runs the installed package: {ran}"
    assert ran["prefix"] == prefix_of(t.build_python()), \
        f"graphdump python runs the build's Python ({t.build_python()}): {ran}"
    p = run([t.build_python(), "-c",
             "import graphdump; print(graphdump.__file__, graphdump.__version__)"],
            cwd=scratch, env=dict(CLEAN, PYTHONPATH=site))
    assert p.returncode == 0 and p.stdout.split() == [
        os.path.join(site, "graphdump", "__init__.py"), version], \
        f"import graphdump from the installed files: {p.stdout}{p.stderr}"


def test_make_install_into_an_environment(scratch):
    env = os.path.join(scratch, "env")
    site = t.make_env(env, with_pip=False)
    p = subprocess.run(["cmake", "--install", t.BUILD_DIR, "--prefix", env],
                       capture_output=True, text=True)
    assert p.returncode == 0, f"cmake --install --prefix {env}: {p.stdout}{p.stderr}"
    check_files(env, site, "install into an environment")
    ran = run_script(env, scratch, "install_env")
    # The environment's own python3, by the path beside graphdump (a symlink to the base
    # interpreter: resolved, it would lose the environment).
    assert ran["executable"] == os.path.join(env, "bin", "python3") and \
        os.path.realpath(ran["prefix"]) == os.path.realpath(env), \
        f"graphdump python runs {env}/bin/python3, not the build's Python: {ran}"
    assert ran["graphdump"] == os.path.join(site, "graphdump", "__init__.py"), \
        f"graphdump python runs the package installed into the environment: {ran}"


@pytest.fixture(scope="module")
def pip_env(module_scratch):
    """A fresh virtual environment with graphdump installed by pip from the repository; returns
    (environment, site-packages, pip's output)."""
    env = os.path.join(module_scratch, "env")
    site = t.make_env(env, with_pip=True)
    # The build compiles what `make build` compiled, so that ccache finds the objects of the
    # build under test again (a cold build of the torch sources takes 10-15 minutes on 2
    # cores): ccache's settings are the Makefile's, the build directory lies one level below
    # the repository as build/ does (ccache rewrites paths below CCACHE_BASEDIR relative to
    # it), and compiler, build type and -Werror are the build's. scikit-build-core would take
    # Python's CXX (g++, which ccache hashes apart from c++) and drops CMAKE_BUILD_TYPE from
    # CMAKE_ARGS, hence CXX and -Ccmake.build-type.
    build = tempfile.mkdtemp(prefix="build-pip-test-", dir=t.SOURCE_DIR)
    ccache = {"CCACHE_BASEDIR": t.SOURCE_DIR, "CCACHE_NOHASHDIR": "1",
              "CCACHE_SLOPPINESS": "pch_defines,time_macros,include_file_mtime,"
                                   "include_file_ctime"}
    try:
        p = run([os.path.join(env, "bin", "pip"), "install", "--no-build-isolation", "--no-deps",
                 "--no-index", "--disable-pip-version-check",
                 "--config-settings=cmake.build-type=" + t.build_setting("CMAKE_BUILD_TYPE"),
                 f"--config-settings=build-dir={build}", t.SOURCE_DIR],
                cwd=module_scratch, timeout=3600,
                env=dict(CLEAN, **ccache, CXX=t.build_setting("CMAKE_CXX_COMPILER"),
                         CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache "
                                    "-DGRAPHDUMP_WERROR=" + t.build_setting("GRAPHDUMP_WERROR")))
    finally:
        shutil.rmtree(build, ignore_errors=True)
    assert p.returncode == 0 and "Successfully installed graphdump" in p.stdout, \
        f"pip install --no-build-isolation: {p.returncode}\n{p.stdout[-3000:]}{p.stderr[-6000:]}"
    return env, site, p.stdout + p.stderr


def test_pip_install(pip_env, module_scratch):
    env, site, _ = pip_env
    check_files(env, site, "pip")
    version = check_version(env, module_scratch, "pip")
    check_torch_host(env, module_scratch, "pip")
    python = os.path.join(env, "bin", "python")
    p = run([python, "-c", "import graphdump; print(graphdump.__file__, graphdump.__version__)"],
            cwd=module_scratch)
    assert p.returncode == 0 and p.stdout.split() == [
        os.path.join(site, "graphdump", "__init__.py"), version], \
        f"import graphdump in the environment: {p.stdout}{p.stderr}"


def test_pip_graphdump_python(pip_env, module_scratch):
    env, site, _ = pip_env
    ran = run_script(env, module_scratch, "pip")
    assert os.path.dirname(ran["executable"]) == os.path.join(env, "bin") and \
        os.path.realpath(ran["prefix"]) == os.path.realpath(env), \
        f"graphdump python runs the environment's python: {ran}"
    assert ran["graphdump"] == os.path.join(site, "graphdump", "__init__.py"), \
        f"graphdump python runs the package pip installed: {ran}"


def test_pip_graphdump_python_other_python(pip_env, module_scratch):
    # --python: the build's Python (the project's environment) instead of the environment's.
    env, site, _ = pip_env
    other = t.build_python()
    ran = run_script(env, module_scratch, "pip_other", extra=["--python", other])
    assert ran["executable"] == other and ran["prefix"] == prefix_of(other), \
        f"graphdump python --python {other} runs it: {ran}"
