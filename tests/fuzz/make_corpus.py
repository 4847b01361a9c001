#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tests/fuzz/corpus/<target>/) from the repository's own
examples and test generators: examples/*.json, a `graphdump demo-synthetic` dump (its .npy files,
statistic.csv and .ir), tests/python/make_ascend_dump.py's dump files (good and corrupt), and
.npy files of every descr graphdump reads. The corpora are committed; run this again (with
Debian's python3, numpy and a built graphdump) only to refresh them.

usage: make_corpus.py GRAPHDUMP_BINARY
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
MAX_BYTES = 16 * 1024  # small seeds fuzz fast


def target(name):
    path = os.path.join(CORPUS, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def put(directory, name, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) <= MAX_BYTES:
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def put_files(directory, root, pattern, stem, limit=None):
    """Copies the files of `root` matching `pattern` (recursively) as {stem}{i}{extension}."""
    paths = sorted(glob.glob(os.path.join(root, "**", pattern), recursive=True))[:limit]
    for i, path in enumerate(paths):
        put(directory, f"{stem}{i}{os.path.splitext(path)[1]}", read(path))


# Kernel records as a dump's graph file holds them: (full name, op type, schema, arguments).
REPLAY_KERNELS = [
    ("Default/net-Net/add-op0", "add",
     "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
     [("self", "input.0"), ("other", "input.1"), ("alpha", "1")]),
    ("Default/net-Net/conv2d-op1", "conv2d",
     "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
     "int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor",
     [("input", "input.0"), ("weight", "input.1"), ("bias", "None"), ("stride", "[1, 1]"),
      ("padding", "[1, 1]"), ("dilation", "[1, 1]"), ("groups", "1")]),
    ("Default/net-Net/cat-op2", "cat", "aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
     [("tensors", "[input.0, input.1]"), ("dim", "-1")]),
    ("Default/net-Net/relu-op3", "relu", "aten::save(t item, str filename) -> ()",
     [("item", "input.0"), ("filename", '"/tmp/x"')]),
    ("Default/net-Net/expand-op4", "expand",
     "aten::expand(Tensor(a) self, int[] size, *, bool implicit=False) -> Tensor(a)",
     [("self", "input.0"), ("size", "[1000000, 1000000, 80]"), ("implicit", "False")]),
    ("Default/net-Net/to-op5", "to",
     "aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
     "MemoryFormat? memory_format=None) -> Tensor(a)",
     [("self", "input.99999999999999999999"), ("dtype", "99"), ("non_blocking", "False"),
      ("copy", "False"), ("memory_format", "None")]),
    ("Default/net-Net/layer_norm-op6", "layer_norm",
     "aten::layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
     "Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor",
     [("input", "input.0"), ("normalized_shape", "[[[[8]]]]"), ("weight", "input.1"),
      ("bias", "input.2"), ("eps", "1e-05"), ("cudnn_enable", "True")]),
    ("Default/net-Net/softmax-op7", "softmax",
     "aten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
     [("self", "input.0"), ("dim", "-1"), ("dtype", "None")]),
]


def replay_call_seeds(work):
    """replay_call: kernel records as text (first byte odd) and as graph files (even)."""
    seeds = target("replay_call")
    for i, (name, op_type, schema, args) in enumerate(REPLAY_KERNELS):
        text = "\n".join([name, op_type, schema] + [f"{k}={v}" for k, v in args])
        put(seeds, f"text{i}", bytes([1 + 2 * len([a for a in args if "input." in a[1]])]) +
            text.encode())
    subprocess.run(["protoc", "--python_out=" + work, "-I", os.path.join(SOURCE, "proto"),
                    os.path.join(SOURCE, "proto", "graphdump_graph.proto")], check=True)
    sys.path.insert(0, work)
    import graphdump_graph_pb2  # noqa: E402
    graph = graphdump_graph_pb2.GraphProto(graph_id=0, name="forward")
    for i, (name, op_type, schema, args) in enumerate(REPLAY_KERNELS):
        k = graph.kernels.add(index=i, full_name=name, op_type=op_type, schema=schema)
        for arg, value in args:
            k.arguments.add(name=arg, value=value)
    put(seeds, "graph.pb", bytes([4]) + graph.SerializeToString())


def main(binary):
    work = tempfile.mkdtemp(prefix="graphdump_corpus_")
    try:
        # configuration: the examples, the GE dialect of docs/ascend.md, a few edge cases.
        config = target("config")
        for path in sorted(glob.glob(os.path.join(SOURCE, "examples", "*.json"))):
            put(config, os.path.basename(path), read(path))
        put(config, "ge.json", json.dumps({"dump": {
            "enable_dump": True, "dump_path": "/tmp/dump", "dump_step": "0|5|10",
            "dump_mode": "all", "dump_layer": "conv1 fc"}}))
        put(config, "unknown_keys.json", json.dumps({"common_dump_settings": {
            "dump_mode": 1, "path": "/d", "net_name": "N", "iteration": "0 | 5-8",
            "input_output": 0, "kernels": ["name-regex(Default/.+)", "conv"],
            "support_device": [0], "sampl_num": 3, "op_debug_mode": 3, "overflow_number": 2},
            "e2e_dump_settings": {"enable": False, "trans_flag": False, "sample_mode": 1,
                                  "sample_num": 5, "stat_calc_mode": "device"}}))

        # iteration and kernel grammars: "ITERATION\nKERNEL ENTRY".
        grammar = target("grammar")
        cases = ["all\nConv2D", "0|5-8|100-120\nname-regex(Default/.+-op1[0-9])",
                 "0 | 5-8 | 100-120\nDefault/net-Net/Conv2D-op12", "1||3\n\"relu\"",
                 "8-5\nname-regex((", "18446744073709551615\nfc 1", "0-18446744073709551615\n-op",
                 "3-\nname-regex(a)b"]
        for i, case in enumerate(cases):
            put(grammar, f"case{i}", case)

        # .npy: every descr, versions 1.0 and 2.0, a scalar, an empty array, Fortran order,
        # raw bfloat16 ('<E2'), and the files of a real dump.
        npy = target("npy")
        values = np.array([[1.5, -2.0, 0.0], [np.inf, np.nan, 7.0]])
        for descr in ["|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4",
                      "<f8", "<c8", "<c16"]:
            a = np.nan_to_num(values, posinf=5, neginf=-5).astype(np.dtype(descr)) if descr[1] in "biu" else \
                values.astype(np.dtype(descr))
            path = os.path.join(work, "a.npy")
            np.save(path, a)
            put(npy, descr.replace("<", "le_").replace("|", "na_") + ".npy", read(path))
        np.save(os.path.join(work, "s.npy"), np.float32(3.0))
        put(npy, "scalar.npy", read(os.path.join(work, "s.npy")))
        np.save(os.path.join(work, "e.npy"), np.zeros((0, 4), np.float32))
        put(npy, "empty.npy", read(os.path.join(work, "e.npy")))
        np.save(os.path.join(work, "f.npy"), np.asfortranarray(values.astype(np.float32)))
        put(npy, "fortran.npy", read(os.path.join(work, "f.npy")))
        v2 = os.path.join(work, "v2.npy")
        with open(v2, "wb") as f:
            np.lib.format.write_array(f, values.astype(np.float32), version=(2, 0))
        put(npy, "version2.npy", read(v2))
        bf16 = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        np.save(os.path.join(work, "b.npy"), bf16)
        put(npy, "bfloat16_E2.npy", read(os.path.join(work, "b.npy")).replace(b"'<u2'", b"'<E2'"))

        # A real dump: .npy files, statistic.csv with every category, the .ir.
        dump = os.path.join(work, "dump")
        cfg = os.path.join(work, "c.json")
        with open(cfg, "w") as f:
            json.dump({"common_dump_settings": {
                "dump_mode": 0, "path": dump, "net_name": "Net", "iteration": "all",
                "saved_data": "full", "input_output": 0, "kernels": [], "support_device": [0],
                "statistic_category": ["max", "min", "avg", "count", "negative zero count",
                                       "positive zero count", "nan count", "negative inf count",
                                       "positive inf count", "zero count", "md5", "l2norm"]}}, f)
        subprocess.run([binary, "demo-synthetic", "--config", cfg, "--steps", "1",
                        "--nan-kernel", "1"], check=True, capture_output=True)
        put_files(npy, dump, "*.npy", "dump", limit=12)
        statistic = target("statistic_csv")
        put_files(statistic, dump, "statistic.csv", "dump")
        put(statistic, "minimal.csv", "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,"
            "Data Size,Data Type,Shape,Max Value\nAdd,Default_Add-op1,0,0,1,output,0,4,"
            "float32,\"(1)\",1,\n")
        ir = target("ir")
        put_files(ir, dump, "*.ir", "dump")
        put(ir, "mindspore.ir", "# IR entry: @graph_0\n"
            "  %1(CNode_1) = Conv2D(%0)\n      : (<Tensor[Float32], ()>) -> (<Tensor[Float32], ()>)\n"
            "      # Fullname with scope: (Default/net-Net/Conv2D-op1)\n"
            "      # In file /home/user/model.py(10)/        x = self.conv(x)/\n"
            "      # In file model.py:12/ y = x/\n")

        # Ascend dump files: the independent generator's, good and corrupt.
        ascend = target("ascend_dump")
        generated = os.path.join(work, "ascend")
        subprocess.run([sys.executable, os.path.join(SOURCE, "tests", "python",
                                                     "make_ascend_dump.py"), generated,
                        "--corrupt"], check=True, capture_output=True)
        files = sorted(glob.glob(os.path.join(generated, "dump", "*")) +
                       glob.glob(os.path.join(generated, "corrupt", "*")), key=os.path.getsize)
        for i, path in enumerate(files[:24]):
            put(ascend, f"file{i}", read(path))

        mapping = target("mapping_csv")
        put(mapping, "two.csv", "1.npy,Conv2D." + "a" * 250 + ".0.0.1.output.0.DefaultFormat."
            "float32.npy\n2.npy,MatMul.b.0.0.2.input.1.DefaultFormat.float16.npy\n")
        put(mapping, "crlf.csv", "17,Add.x.0.0.5\r\nbad line\r\n,empty\r\n17,again\r\n")
        replay_call_seeds(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
