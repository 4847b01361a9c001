"""Helpers for graphdump's end-to-end tests (ctest runs them with the Python of the project's
environment, .venv/bin/python)."""
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

BIN = os.environ.get("GRAPHDUMP_BIN", "graphdump")
SOURCE_DIR = os.environ.get("GRAPHDUMP_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
BUILD_DIR = os.environ.get("GRAPHDUMP_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
# The Python for the tests' own scripts (models, references): $GRAPHDUMP_PYTHON, else the one
# running the tests.
PYTHON = os.environ.get("GRAPHDUMP_PYTHON") or sys.executable

def run(*args, env=None, check=None, cwd=None, timeout=600):
    """Runs the graphdump CLI; returns (exit code, stdout, stderr)."""
    full_env = dict(os.environ)
    for key in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"):
        full_env.pop(key, None)
    full_env.update(env or {})
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, env=full_env,
                       cwd=cwd, timeout=timeout)
    if check is not None and p.returncode != check:
        raise AssertionError(f"graphdump {' '.join(map(str, args))} exited {p.returncode}, "
                             f"expected {check}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p.returncode, p.stdout, p.stderr


def temp_dir():
    d = tempfile.mkdtemp(prefix="graphdump_e2e_")
    return d


def cleanup(path):
    """Removes `path`, first making what a test left read-only (a finished dump) writable.
    Symbolic links are left alone: chmod follows them, and a virtual environment's bin/python
    links to the base interpreter, which a chmod 0600 would make unrunnable for everyone."""
    for root, dirs, files in os.walk(path):
        for names, mode in ((dirs, 0o700), (files, 0o600)):
            for name in names:
                entry = os.path.join(root, name)
                if not os.path.islink(entry):
                    os.chmod(entry, mode)
    shutil.rmtree(path, ignore_errors=True)


def write_config(path, dump_path, common=None, e2e=None):
    """Writes a data_dump.json with sensible defaults overridden by `common` / `e2e`."""
    c = {"dump_mode": 0, "path": dump_path, "net_name": "Net", "iteration": "all",
         "saved_data": "tensor", "input_output": 0, "kernels": [], "support_device": [0, 1, 2, 3]}
    c.update(common or {})
    cfg = {"common_dump_settings": c}
    if e2e is not None:
        cfg["e2e_dump_settings"] = e2e
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return path


def in_small_tmpfs(work, size, command, env=None):
    """Runs `command` (a shell line) with a `size` tmpfs mounted at work/disk, in a user and
    mount namespace; the disk's files are copied to work/copy. None when no namespace can be
    made here (then the unit tests' injectable file system is the check)."""
    disk, copy = os.path.join(work, "disk"), os.path.join(work, "copy")
    os.makedirs(disk, exist_ok=True)
    script = (f"mount -t tmpfs -o size={size} tmpfs {disk} || exit 99; {command}; rc=$?; "
              f"cp -a {disk}/. {copy}/ 2>/dev/null; exit $rc")
    os.makedirs(copy, exist_ok=True)
    p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                       capture_output=True, text=True, env=env, timeout=600)
    if p.returncode == 99 or "unshare:" in p.stderr:
        print(f"SKIP: no tmpfs in a user namespace here: {p.stderr.strip()[:200]}")
        return None
    return p


def files(pattern):
    return sorted(glob.glob(pattern, recursive=True))


def make_env(path, with_pip=False):
    """Makes a fresh virtual environment at `path` (python -m venv) that also sees the torch
    and scikit-build-core of the Python running the tests, through a .pth file in its
    site-packages: a user's environment with torch, without installing torch into it again
    (about 60 s and a 1.3 GB download for torch==2.13.0). Returns its site-packages."""
    command = [sys.executable, "-m", "venv", path]
    if not with_pip:
        command.append("--without-pip")
    p = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"python -m venv {path}: {p.stdout}{p.stderr}"
    site = sysconfig.get_path("platlib", "posix_prefix", vars={"base": path, "platbase": path})
    assert os.path.isdir(site), f"the environment has {site}: {os.listdir(path)}"
    shared = []
    for module in ("torch", "scikit_build_core"):
        spec = importlib.util.find_spec(module)
        assert spec is not None, f"{module} is importable by {sys.executable}"
        root = os.path.dirname(os.path.dirname(spec.origin))
        if root not in shared:
            shared.append(root)
    with open(os.path.join(site, "graphdump-test-shared.pth"), "w") as f:
        f.write("\n".join(shared) + "\n")
    return site


def build_python():
    """The Python the build was configured with (GRAPHDUMP_PYTHON in its CMakeCache.txt): the
    one graphdump python falls back on."""
    with open(os.path.join(BUILD_DIR, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("GRAPHDUMP_PYTHON:FILEPATH="):
                return line.split("=", 1)[1].strip()
    raise AssertionError(f"{BUILD_DIR}/CMakeCache.txt names no GRAPHDUMP_PYTHON")
