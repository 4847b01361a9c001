"""`make install` as a user runs it: installed into a scratch DESTDIR, graphdump --version,
graphdump python and `import graphdump` work from outside the repository, from the installed
files alone (docs/README.md, "Install")."""
import os
import subprocess
import sys

import gdtest as t

work = t.temp_dir()
try:
    stage = os.path.join(work, "stage")
    env = dict(os.environ, DESTDIR=stage)
    p = subprocess.run(["cmake", "--install", t.BUILD_DIR, "--prefix", "/usr/local"], env=env,
                       capture_output=True, text=True)
    t.expect_eq(p.returncode, 0, f"cmake --install: {p.stdout}{p.stderr}")
    prefix = stage + "/usr/local"
    pythondir = "lib/python3.%d/dist-packages" % sys.version_info.minor  # Debian's python3
    site = os.path.join(prefix, pythondir)
    for path in ("bin/graphdump", "bin/graphdump-torch", pythondir + "/graphdump/__init__.py",
                 pythondir + "/graphdump/torch.py"):
        t.expect(os.path.isfile(os.path.join(prefix, path)), f"installed: {path}")
    t.expect(any(n.startswith("_graphdump") and n.endswith(".so")
                 for n in os.listdir(site + "/graphdump")), "installed: the extension")
    # Debian's python3 looks in {prefix}/lib/python3.N/dist-packages for /usr/local (and /usr).
    p = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"],
                       capture_output=True, text=True, cwd=work)
    t.expect("/usr/local/" + pythondir in p.stdout.split() and
             "/usr/" + pythondir in p.stdout.split(),
             f"Debian's python3 searches the install directory: {p.stdout}")

    # Outside the repository, nothing of the build on any path.
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG",
                          "GRAPHDUMP_PYTHONPATH")}
    version = subprocess.run([prefix + "/bin/graphdump", "--version"], capture_output=True,
                             text=True, cwd=work, env=clean)
    t.expect(version.returncode == 0 and version.stdout.startswith("graphdump "),
             f"graphdump --version: {version.stdout}{version.stderr}")
    script = os.path.join(work, "where.py")
    with open(script, "w") as f:
        f.write("import torch, graphdump\n"
                "net = torch.jit.script(torch.nn.Linear(2, 2))\n"
                "net(torch.ones(1, 2))\n"
                "print(graphdump.__file__)\n")
    config = t.write_config(os.path.join(work, "d.json"), os.path.join(work, "dump"))
    p = subprocess.run([prefix + "/bin/graphdump", "python", "--config", config, script],
                       capture_output=True, text=True, cwd=work, env=clean)
    t.expect(p.returncode == 0 and p.stdout.strip().startswith(site + "/graphdump/"),
             f"graphdump python runs the installed package: {p.returncode}\n{p.stdout}{p.stderr}")
    t.expect(len(t.files(os.path.join(work, "dump", "**", "*.npy"))) > 0,
             "graphdump python dumped the scripted module")
    p = subprocess.run(["/usr/bin/python3", "-c",
                        "import graphdump; print(graphdump.__file__, graphdump.__version__)"],
                       capture_output=True, text=True, cwd=work, env=dict(clean, PYTHONPATH=site))
    t.expect(p.returncode == 0 and p.stdout.startswith(site + "/graphdump/__init__.py"),
             f"import graphdump from the installed files: {p.stdout}{p.stderr}")
finally:
    t.cleanup(work)
t.finish()
