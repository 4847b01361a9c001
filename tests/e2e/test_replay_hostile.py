"""A dump is data, never code (docs/reliability.md): replay of crafted graph files. Each case
edits the recorded call of one kernel of a real dump (graphs/*.pb, through the project's proto)
and expects `graphdump replay` to exit 3 naming why, and graphdump.replay in Python to return
verdict "not replayable" with the same reason: another operator than the kernel's own (aten::save
writes no file anywhere), an input slot past 64 bits, lists nested 50,000 deep or 5 million long,
an expand to 640 GB, a channel shuffle whose groups do not divide the channels, an invalid
ScalarType. The unedited dump replays."""
import itertools
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import gdtest as t
import graph_proto

PYTHON_REPLAY = """
import json, sys
import graphdump
print(json.dumps(graphdump.replay(sys.argv[1], sys.argv[2])))
"""


class Victim(torch.nn.Module):
    def forward(self, x):
        a = torch.relu(x)
        b = a.expand(2, 4, 2, 2)
        c = torch.native_channel_shuffle(b, 2)
        d = c.to(torch.float64)
        return torch.cat([d, d], 1)


def replay_cli(rank_dir, kernel, cwd=None):
    code, out, err = t.run("replay", rank_dir, kernel, "--json", cwd=cwd, timeout=300)
    return code, (json.loads(out) if out.strip() else None), err


def replay_python(rank_dir, kernel, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(t.BUILD_DIR, "python"), OMP_NUM_THREADS="1")
    p = subprocess.run([t.PYTHON, "-c", PYTHON_REPLAY, rank_dir, kernel],
                       capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else None), p.stderr


@pytest.fixture(scope="module")
def root(module_scratch):
    """A dump of Victim (its rank directory is root/rank_0)."""
    models = os.path.join(module_scratch, "models")
    os.makedirs(models)
    torch.jit.save(torch.jit.script(Victim()), os.path.join(models, "victim.pt"))
    np.save(os.path.join(models, "x.npy"),
            np.random.default_rng(5).standard_normal((1, 4, 2, 2)).astype(np.float32))
    root = os.path.join(module_scratch, "dump")
    cfg = t.write_config(os.path.join(module_scratch, "c.json"), root)
    t.run("run", os.path.join(models, "victim.pt"), "--input", os.path.join(models, "x.npy"),
          "--config", cfg, check=0)
    return root


_copies = itertools.count(1)


def crafted(work, root, op_type, schema=None, arguments=None, **values):
    """A copy of the dump whose `op_type` kernel records `schema` and `values` (or the
    whole `arguments` list); returns (rank dir, full name)."""
    dump = os.path.join(work, f"crafted{next(_copies)}")
    shutil.copytree(root, dump)
    rank_dir = os.path.join(dump, "rank_0")
    graph = graph_proto.read(rank_dir)
    k = graph_proto.kernel(graph, op_type)
    if arguments is not None:
        del k.arguments[:]
        for name, value in arguments:
            k.arguments.add(name=name, value=value)
    graph_proto.set_call(k, schema, **values)
    graph_proto.write(rank_dir, graph)
    return rank_dir, k.full_name


def refused(rank_dir, kernel, reason, what, cwd=None):
    """Both the CLI and Python refuse the kernel with `reason` in their words."""
    code, r, err = replay_cli(rank_dir, kernel, cwd)
    assert (code == 3 and r is not None and not r["replayable"] and reason in r["reason"]
            and reason in err), f"{what}: CLI exit 3 naming '{reason}': {code} {r} {err}"
    code, r, err = replay_python(rank_dir, kernel, cwd)
    assert code == 0 and r["verdict"] == "not replayable" and reason in r["reason"], (
        f"{what}: graphdump.replay returns 'not replayable' ({reason}): {code} {r} {err}")


@pytest.mark.parametrize("op", ["relu", "expand", "native_channel_shuffle", "to", "cat"])
def test_the_dump_as_written_replays(root, op):
    code, r, err = replay_cli(os.path.join(root, "rank_0"), op)
    assert code == 0 and r["replayable"] and r["reproduces"], (
        f"unedited {op} replays: {code} {r} {err}")


@pytest.mark.parametrize("in_target", [True, False])
def test_a_kernel_recording_aten_save_runs_nothing(module_scratch, root, in_target):
    # A relu kernel recording aten::save: nothing runs, no file appears.
    target_dir = os.path.join(module_scratch, "target")
    cwd = os.path.join(module_scratch, "cwd")
    os.makedirs(target_dir, exist_ok=True)
    os.makedirs(cwd, exist_ok=True)
    filename = os.path.join(target_dir, "owned.pt") if in_target else "owned.pt"
    rank_dir, name = crafted(module_scratch, root, "relu", "aten::save(t item, str filename) -> ()",
                             [("item", "input.0"), ("filename", json.dumps(filename))])
    before = sorted(os.listdir(os.path.dirname(rank_dir)))
    refused(rank_dir, name, "its recorded schema names aten::save and the kernel's op type "
            "is 'relu': replay runs only a kernel's own operator", f"save to {filename}", cwd)
    assert (os.listdir(target_dir), os.listdir(cwd)) == ([], []), (
        f"save to {filename}: no file written")
    assert sorted(os.listdir(os.path.dirname(rank_dir))) == before, (
        "save: the dump's directory unchanged")
    found = [os.path.join(d, f) for d, _, fs in os.walk(module_scratch) for f in fs if "owned" in f]
    assert found == [], "save: no file named owned anywhere under the work directory"


CRAFTED = [
    # Argument literals: bounded before parsing, slots validated.
    ("cat", dict(tensors="[input.99999999999999999999999, input.1]"),
     "its argument 'tensors': it has an unreadable value: "
     "'[input.99999999999999999999999, input.1]'", "input index past 64 bits"),
    ("cat", dict(tensors="[" * 50000 + "input.0" + "]" * 50000),
     "is refused: it is 100007 bytes long (at most 65536)", "lists nested 50,000 deep"),
    ("cat", dict(tensors="[[[[[[[[input.0]]]]]]]]"), "is refused: its lists nest deeper than 4",
     "lists nested 8 deep"),
    ("cat", dict(dim="[" + "1, " * 5_000_000 + "1]"), "bytes long (at most 65536)",
     "a 5-million-element list"),
    ("cat", dict(tensors="[input.0, input.7]"),
     "it reads input slot 7 and the dump holds 2 inputs of it", "an input slot the dump lacks"),
    # Sizes: checked against the memory budget before anything allocates them.
    ("expand", dict(size="[1000000, 10000, 4, 2, 2]"),
     "its outputs take 596.0 GiB, over replay's memory budget of", "expand to 640 GB"),
    # Values LibTorch would fault on or misread.
    ("native_channel_shuffle", dict(groups="3"),
     "its groups (3) does not divide the input's channels (4)",
     "channel shuffle by 3 of 4 channels (SIGFPE)"),
    ("native_channel_shuffle", dict(groups="0"),
     "its groups (0) does not divide the input's channels (4)", "channel shuffle by 0"),
] + [
    ("to", dict(dtype=dtype),
     f"argument 'dtype': it is no dtype LibTorch computes in (ScalarType {dtype})",
     f"ScalarType {dtype}") for dtype in ("99", "12", "-1")
] + [
    ("to", dict(memory_format="99"), "argument 'memory_format': no memory format is numbered 99",
     "MemoryFormat 99"),
]


@pytest.mark.parametrize("op_type, values, reason, what", CRAFTED, ids=[c[3] for c in CRAFTED])
def test_crafted_calls_are_refused(module_scratch, root, op_type, values, reason, what):
    rank_dir, name = crafted(module_scratch, root, op_type, **values)
    refused(rank_dir, name, reason, what)


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
