"""Every graphdump command shown in README.md and docs/ runs as shown, so an example that stops
working fails make test.

Commands are read from the fenced code blocks (a line starting with `graphdump` or `$ graphdump`,
optionally after VAR=value assignments; lines continued with a backslash are joined). Synopsis
lines (with [optional] parts, `...` or UPPER-CASE placeholders) are skipped. Each command runs
with bash in a workspace holding the files the docs name: model.pt (a small model made here from
model.py, whose line 58 is a kernel's line), train.py, data_dump.json, dump/, dump_fp32/,
dump_bf16/, ascend_dump/, x.npy, y.npy, failing.pt, pos_enc.pt and pos_x.npy (precision.md's
worked example), and examples/ with its configurations
pointed into the workspace. A command followed in its block by `graphdump ...: error: ...` must
fail with that message; every other must exit 0 or 1 (1: watch or compare found something) with
no error on stderr."""
import glob
import json
import os
import re
import shutil
import subprocess

import numpy as np

import gdmodels
import gdtest
import precision_fixture

DOCS = [os.path.join(gdtest.SOURCE_DIR, "README.md")] + sorted(
    glob.glob(os.path.join(gdtest.SOURCE_DIR, "docs", "*.md")))
PLACEHOLDER = re.compile(r"\[|\.\.\.|\b(DIR|FILE|MODEL|LIST|SCRIPT|MODULE|ARGS|OUT|THREADS|N|K)\b")

MODEL_PY = '''"""The docs' model.py: a small classifier (line 58 is a kernel's line)."""
import sys

import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.block(x)), 1))

    def block(self, x):
''' + "\n" * (57 - 19) + '''        h = F.relu(self.conv(x))
        return h


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.jit.script(Net()).save(sys.argv[1])
'''

TRAIN_PY = '''"""The docs' train.py: the user's own training script."""
import argparse

import torch

from model import Net

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
torch.manual_seed(0)
model = torch.jit.script(Net())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])
for _ in range(args.epochs * 2):
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
print("trained")
'''


def doc_commands():
    """[(doc file, line number, command, expected error text or None)]."""
    out = []
    for doc in DOCS:
        lines = open(doc, encoding="utf-8").read().split("\n")
        in_block, i = False, 0
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith("```"):
                in_block = not in_block
                i += 1
                continue
            start = i
            if in_block:
                command = stripped[2:] if stripped.startswith("$ ") else stripped
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                if re.match(r"^([A-Z_]+=\S+\s+)*graphdump\s", command) and \
                        not re.match(r"^graphdump [a-z-]+: ", command):
                    command = re.sub(r"\s+#.*$", "", command)
                    expected = None
                    following = lines[i + 1].strip() if i + 1 < len(lines) else ""
                    if re.match(r"^graphdump [a-z-]+: error: ", following):
                        expected = following
                    if not PLACEHOLDER.search(command.split("graphdump", 1)[1]):
                        out.append((os.path.relpath(doc, gdtest.SOURCE_DIR), start + 1, command,
                                    expected))
            i += 1
    return out


def make_workspace(work):
    py = gdtest.PYTHON
    with open(os.path.join(work, "model.py"), "w") as f:
        f.write(MODEL_PY)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(TRAIN_PY)
    subprocess.run([py, "model.py", "model.pt"], cwd=work, check=True)
    shutil.copy(gdmodels.model_path("failing"), os.path.join(work, "failing.pt"))
    # precision.md's worked example: the positional encoding of precision_models.py.
    shutil.copy(precision_fixture.model("pos_enc"), os.path.join(work, "pos_enc.pt"))
    shutil.copy(precision_fixture.data("pos_x.npy"), os.path.join(work, "pos_x.npy"))
    np.save(os.path.join(work, "x.npy"),
            np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32))
    np.save(os.path.join(work, "y.npy"), np.array([0, 1, 2, 3], np.int64))
    # The docs' data_dump.json: the shipped example, its path in the workspace.
    with open(os.path.join(gdtest.SOURCE_DIR, "examples", "data_dump.json")) as f:
        cfg = json.load(f)
    cfg["common_dump_settings"]["path"] = os.path.join(work, "dump_cfg")
    with open(os.path.join(work, "data_dump.json"), "w") as f:
        json.dump(cfg, f)
    # examples/, its configurations writing into the workspace.
    shutil.copytree(os.path.join(gdtest.SOURCE_DIR, "examples"), os.path.join(work, "examples"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in glob.glob(os.path.join(work, "examples", "**", "*.json"), recursive=True):
        with open(path) as f:
            example = json.load(f)
        settings = example.get("common_dump_settings")
        if settings and settings.get("path"):
            settings["path"] = os.path.join(work, "example_dumps",
                                            os.path.relpath(path, work).replace("/", "_")[:-5])
            with open(path, "w") as f:
                json.dump(example, f)
    # Dumps for the analysis commands.
    for name in ("dump", "dump_fp32", "dump_bf16"):
        config = gdtest.write_config(os.path.join(work, name + ".json"), os.path.join(work, name),
                                     {"saved_data": "full", "iteration": "0"})
        code, _, err = gdtest.run("run", "model.pt", "--input-shape", "2x3x16x16", "--config",
                                  config, cwd=work)
        assert code == 0, f"fixture {name}: {err}"
    code, _, err = gdtest.run("run", "model.pt", "--input-shape", "2x3x16x16", "--enable-dump",
                              "--dump-path", os.path.join(work, "ascend_dump"), cwd=work)
    assert code == 0, f"fixture ascend_dump: {err}"


def test_docs_commands(scratch):
    commands = doc_commands()
    assert len(commands) >= 15, f"the docs show commands: found {len(commands)}"
    make_workspace(scratch)
    env = dict(os.environ)
    bin_dir = os.path.join(scratch, "bin")
    os.makedirs(bin_dir)
    # A wrapper, not a link: cleaning the workspace up changes modes, which would reach the
    # binary through a link.
    wrapper = os.path.join(bin_dir, "graphdump")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nexec {os.path.abspath(gdtest.BIN)} "$@"\n')
    os.chmod(wrapper, 0o755)
    env["PATH"] = bin_dir + ":" + env["PATH"]
    for k in ("GRAPHDUMP_CONFIG", "MINDSPORE_DUMP_CONFIG"):
        env.pop(k, None)
    for doc, line, command, expected in commands:
        # A run writes where data_dump.json says: one run per directory, so start empty.
        shutil.rmtree(os.path.join(scratch, "dump_cfg"), ignore_errors=True)
        shutil.rmtree(os.path.join(scratch, "example_dumps"), ignore_errors=True)
        p = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, capture_output=True,
                           text=True, timeout=300)
        where = f"{doc}:{line}: {command}"
        if expected:
            pieces = [piece.strip() for piece in expected.split("...") if piece.strip()]
            assert p.returncode not in (0, 1) and all(s in p.stderr for s in pieces), \
                f"{where}: fails as shown ({expected}): {p.returncode}\n{p.stderr}"
        else:
            assert p.returncode in (0, 1) and "error:" not in p.stderr, \
                (f"{where}: runs as shown: exit {p.returncode}\n{p.stdout[-800:]}\n"
                 f"{p.stderr[-1500:]}")
