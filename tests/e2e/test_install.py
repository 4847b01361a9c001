"""`make install` and `make deb` as a user runs them: installed into a scratch DESTDIR, and the
.deb built by CPack unpacked by dpkg-deb into a scratch root; in each, graphdump --version,
graphdump python and `import graphdump` work from outside the repository, from the installed
files alone (docs/README.md, "Install")."""
import glob
import os
import subprocess
import sys

import gdtest as t

PYTHONDIR = "lib/python3.%d/dist-packages" % sys.version_info.minor  # Debian's python3
# Outside the repository, nothing of the build on any path.
CLEAN = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG",
                      "GRAPHDUMP_PYTHONPATH")}


def check_installed(prefix, work, what):
    """The installed files under `prefix` (as /usr/local or /usr would hold them) work."""
    site = os.path.join(prefix, PYTHONDIR)
    for path in ("bin/graphdump", "bin/graphdump-torch", PYTHONDIR + "/graphdump/__init__.py",
                 PYTHONDIR + "/graphdump/torch.py"):
        assert os.path.isfile(os.path.join(prefix, path)), f"{what}: installed {path}"
    assert any(n.startswith("_graphdump") and n.endswith(".so")
               for n in os.listdir(site + "/graphdump")), f"{what}: installed the extension"
    version = subprocess.run([prefix + "/bin/graphdump", "--version"], capture_output=True,
                             text=True, cwd=work, env=CLEAN)
    assert version.returncode == 0 and version.stdout.startswith("graphdump "), \
        f"{what}: graphdump --version: {version.stdout}{version.stderr}"
    script = os.path.join(work, "where.py")
    with open(script, "w") as f:
        f.write("import torch, graphdump\n"
                "net = torch.jit.script(torch.nn.Linear(2, 2))\n"
                "net(torch.ones(1, 2))\n"
                "print(graphdump.__file__)\n")
    dump = os.path.join(work, "dump_" + what)
    config = t.write_config(os.path.join(work, what + ".json"), dump)
    p = subprocess.run([prefix + "/bin/graphdump", "python", "--config", config, script],
                       capture_output=True, text=True, cwd=work, env=CLEAN)
    assert p.returncode == 0 and p.stdout.strip().startswith(site + "/graphdump/"), \
        (f"{what}: graphdump python runs the installed package: {p.returncode}\n"
         f"{p.stdout}{p.stderr}")
    assert len(t.files(os.path.join(dump, "**", "*.npy"))) > 0, \
        f"{what}: graphdump python dumped the scripted module"
    p = subprocess.run([sys.executable, "-c",
                        "import graphdump; print(graphdump.__file__, graphdump.__version__)"],
                       capture_output=True, text=True, cwd=work, env=dict(CLEAN, PYTHONPATH=site))
    assert (p.returncode == 0 and p.stdout.startswith(site + "/graphdump/__init__.py") and
            p.stdout.split()[1] == version.stdout.split()[1]), \
        f"{what}: import graphdump from the installed files: {p.stdout}{p.stderr}"


def test_make_install(scratch):
    # make install: cmake --install into a DESTDIR.
    stage = os.path.join(scratch, "stage")
    p = subprocess.run(["cmake", "--install", t.BUILD_DIR, "--prefix", "/usr/local"],
                       env=dict(os.environ, DESTDIR=stage), capture_output=True, text=True)
    assert p.returncode == 0, f"cmake --install: {p.stdout}{p.stderr}"
    # Debian's python3 looks in {prefix}/lib/python3.N/dist-packages for /usr/local (and /usr).
    p = subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.path))"],
                       capture_output=True, text=True, cwd=scratch)
    assert ("/usr/local/" + PYTHONDIR in p.stdout.split() and
            "/usr/" + PYTHONDIR in p.stdout.split()), \
        f"Debian's python3 searches the install directory: {p.stdout}"
    check_installed(stage + "/usr/local", scratch, "install")


def test_deb(scratch):
    # make deb: CPack's package (written here, not into the build directory), unpacked.
    packages = os.path.join(scratch, "packages")
    p = subprocess.run(["cpack", "--config", os.path.join(t.BUILD_DIR, "CPackConfig.cmake"),
                        "-G", "DEB", "-B", packages], capture_output=True, text=True, cwd=scratch)
    debs = glob.glob(os.path.join(packages, "graphdump_*.deb"))
    assert p.returncode == 0 and len(debs) == 1, f"cpack -G DEB: {debs}\n{p.stdout}{p.stderr}"
    fields = subprocess.run(["dpkg-deb", "-f", debs[0], "Package", "Architecture",
                             "Depends"], capture_output=True, text=True).stdout
    # dpkg-shlibdeps' libraries (LibTorch's among them) and the Python modules it imports.
    assert ("Package: graphdump" in fields and "Architecture: amd64" in fields and
            "libtorch" in fields and "python3-torch" in fields and
            "python3-numpy" in fields), f"the package's control fields: {fields}"
    listing = subprocess.run(["dpkg-deb", "-c", debs[0]], capture_output=True,
                             text=True).stdout
    assert "./usr/bin/graphdump\n" in listing and "./usr/local/" not in listing, \
        f"the package installs under /usr: {listing[:2000]}"
    root = os.path.join(scratch, "root")
    p = subprocess.run(["dpkg-deb", "-x", debs[0], root], capture_output=True, text=True)
    assert p.returncode == 0, f"dpkg-deb -x: {p.stderr}"
    check_installed(root + "/usr", scratch, "deb")
