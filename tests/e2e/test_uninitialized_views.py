"""Uninitialised memory is not data (docs/file-format.md): an `empty` buffer, the views of it
(`buf[0]`, `buf.view(-1)`) and the kernels that read them before anything writes the buffer are
marked in the graph files, by graphdump's TorchScript executor (`graphdump run MODEL.pt`) as by
the eager capture (`graphdump python`), and compare and watch leave those tensors out; what
reads the buffer after `fill_` wrote it is data again."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import gdtest as t

MODEL = '''
import torch, torch.nn as nn

class M(nn.Module):
    def forward(self, x):
        buf = torch.empty(4, 8)
        row = buf[0]
        v = buf.view(-1)
        y = row + x            # reads a view of memory nothing wrote
        buf.fill_(1.0)         # written from here on
        return y.sum() + buf.sum() + v.sum()
'''

SCRIPTED = MODEL + '''
import sys
torch.jit.script(M()).save(sys.argv[1])
'''

EAGER = MODEL + '''
M()(torch.ones(8))
'''

# (kernel, io, slot) that hold memory nothing wrote; v.sum() after fill_ (sum-op8) reads data.
MARKED = {("Default/empty-op0", "output", 0), ("Default/select-op1", "input", 0),
          ("Default/select-op1", "output", 0), ("Default/view-op2", "input", 0),
          ("Default/view-op2", "output", 0), ("Default/add-op3", "input", 0),
          ("Default/fill_-op4", "input", 0)}


@pytest.fixture(scope="module")
def dumps(module_scratch):
    work = module_scratch
    for name, text in (("scripted.py", SCRIPTED), ("eager.py", EAGER)):
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    model = os.path.join(work, "m.pt")
    made = subprocess.run([t.PYTHON, os.path.join(work, "scripted.py"), model],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-800:]
    x = os.path.join(work, "x.npy")
    np.save(x, np.ones(8, np.float32))
    out = {}
    for kind in ("torchscript", "eager"):
        dump = os.path.join(work, kind)
        cfg = t.write_config(dump + ".json", dump)
        if kind == "torchscript":
            code, _, err = t.run("run", model, "--input", x, "--config", cfg)
        else:
            code, _, err = t.run("python", "--config", cfg, "--", os.path.join(work, "eager.py"))
        assert code == 0, err[-1500:]
        out[kind] = os.path.join(dump, "rank_0")
    return out


def marks(rank_dir):
    """{(kernel, io, slot)} the graph files' `# Uninitialized:` lines list."""
    found = set()
    graphs = os.path.join(rank_dir, "graphs")
    for name in sorted(os.listdir(graphs)):
        if not name.endswith(".ir"):
            continue
        with open(os.path.join(graphs, name)) as f:
            kernel = None
            for line in f:
                m = re.search(r"# Fullname with scope: \((.*)\)", line)
                if m:
                    kernel = m.group(1)
                m = re.search(r"# Uninitialized: (.*)", line)
                if m:
                    for part in m.group(1).split(", "):
                        io, slot = part.split()
                        found.add((kernel, io, int(slot)))
    return found


@pytest.mark.parametrize("kind", ["torchscript", "eager"])
def test_views_of_an_empty_buffer_are_marked(dumps, kind):
    assert marks(dumps[kind]) == MARKED, sorted(marks(dumps[kind]) ^ MARKED)


@pytest.mark.parametrize("kind", ["torchscript", "eager"])
def test_compare_and_watch_leave_them_out(dumps, kind):
    rank = dumps[kind]
    other = dumps["eager" if kind == "torchscript" else "torchscript"]
    code, out, err = t.run("compare", rank, other, "--json", "-q")
    assert code in (0, 1), err[-800:]
    tensors = {(k["kernel_a"], tn["io"], tn["slot"]): tn for k in json.loads(out)["kernels"]
               for tn in k["tensors"]}
    for key in MARKED:
        assert tensors[key]["mode"] == "uninitialized", (key, tensors[key])
    data = [key for key in tensors if key not in MARKED]
    assert ("Default/sum-op8", "input", 0) in data and len(data) >= 10, data
    assert all(tensors[key]["mode"] != "uninitialized" for key in data)
    # The empty buffer's bytes: whatever the memory held; the files are there, watch skips them.
    # (The TorchScript dump also holds the graph's constants, which watch checks too.)
    files = [f for sub in ("0", "constants") if os.path.isdir(os.path.join(rank, "Net", "0", sub))
             for f in os.listdir(os.path.join(rank, "Net", "0", sub)) if f.endswith(".npy")]
    code, out, err = t.run("watch", rank, "--check", "nan,inf,large", "--json", "-q")
    assert code in (0, 1), err[-800:]
    w = json.loads(out)
    assert w["tensors_checked"] == len(files) - len(MARKED), (w["tensors_checked"], len(files))
    # A hit may be on add-op3's output (garbage plus x), never on a marked tensor.
    hits = {(h["kernel"], h["io"], h["slot"]) for h in w["hits"]}
    assert not hits & MARKED, sorted(hits & MARKED)


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
