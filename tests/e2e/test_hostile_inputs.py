"""Hostile input to every reader (docs/reliability.md): each case once crashed, hung, gave wrong
numbers or wrote a bad file. Now: a clear error naming the file or key, exit 2 for a bad
configuration, and the analysis tools go on with the rest of the dump."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import analysis_dumps as d
import gdmodels
import gdtest as t

sys.path.insert(0, os.path.join(t.SOURCE_DIR, "tests", "python"))
import make_ascend_dump  # noqa: E402  (the DumpData message, compiled with protoc)

# A hang is the failure some of these cases had: every command gets a generous limit, and
# running past it fails the check instead of blocking the suite.
LIMIT = 120


def run(*args, **kwargs):
    try:
        return t.run(*args, timeout=LIMIT, **kwargs)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {LIMIT} s (blocked)"


def config(path, net_name="Net", dump_path=None):
    return {"common_dump_settings": {"dump_mode": 0, "path": dump_path or "/tmp/x",
                                     "net_name": net_name, "iteration": "all", "input_output": 0,
                                     "kernels": [], "support_device": [0]}}


def parse(out, what):
    """The JSON a command printed (a failed test when it printed none)."""
    try:
        return json.loads(out)
    except ValueError as e:
        pytest.fail(f"{what} prints JSON: {e}: {out[-200:]!r}")


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def npy_file(root, kernel, io="output"):
    [path] = glob.glob(os.path.join(root, "rank_0", "Net", "0", "0", f"*{kernel}*.{io}.0.*"))
    return path


def test_hostile_inputs(scratch):
    # 1. A configuration nested 50,000 deep crashed check-config (stack overflow), 100,000 run.
    for depth, command in ((50000, ["check-config"]), (100000, ["run", "model.pt"])):
        deep = os.path.join(scratch, f"deep{depth}.json")
        write_bytes(deep, b'{"common_dump_settings": {"path": ' + b"[" * depth + b"]" * depth
                    + b"}}")
        args = command + [deep] if command[0] == "check-config" else command + ["--config", deep]
        code, out, err = run(*args)
        assert code == 2, f"{command[0]}: a deep configuration is a configuration error"
        assert (f"{deep}: Parse dump json failed, error: arrays and objects nest deeper than "
                "64 levels at line 1, column " in err), f"{command[0]}: the error says why: {err}"

    # 10. net_name over 255 bytes passed check-config and failed every write of the run.
    long_name = os.path.join(scratch, "long_name.json")
    with open(long_name, "w") as f:
        json.dump(config(long_name, net_name="N" * 256, dump_path=os.path.join(scratch, "ln")), f)
    for command in (["check-config", long_name],
                    ["run", gdmodels.model_path("mlp"), "--input-shape", "2x12", "--config",
                     long_name]):
        code, out, err = run(*command)
        assert code == 2, f"{command[0]}: a 256-byte net_name is a configuration error"
        assert ("common_dump_settings.net_name: net_name is 256 bytes long, but it names a "
                "directory of the dump and a directory name can be at most 255 bytes" in err), \
            f"{command[0]} names the key: {err[-400:]}"
    assert not os.path.exists(os.path.join(scratch, "ln")), "nothing was written"

    net = d.simple_net(n=3, size=(64, 32))
    a, b = os.path.join(scratch, "a"), os.path.join(scratch, "b")
    d.write_dump(a, {0: net})
    d.write_dump(b, {0: net})

    # 2. Raw bfloat16 ('<E2', ml_dtypes) was read with 4 bytes per element: wrong metrics, and
    # a SIGSEGV past the end of a 1M-element file.
    x = net[0]["outputs"][0]
    bits = (x.view(np.uint32) + 0x8000 >> 16).astype(np.uint16)  # bfloat16, rounded
    raw = npy_file(a, "layer0")
    os.remove(raw)
    np.save(raw, bits)
    with open(raw, "r+b") as f:
        header = f.read(128)
        f.seek(header.index(b"'<u2'"))
        f.write(b"'<E2'")
    os.rename(raw, raw.replace(".float32.npy", ".bfloat16.npy"))
    code, out, err = run("compare", a, b, "--json")
    kernels = [k for k in parse(out, "compare").get("kernels", []) if "layer0" in k["kernel_a"]]
    m = [tt for k in kernels for tt in k["tensors"] if tt["io"] == "output"][0]["metrics"] \
        if kernels else {"cosine": 0, "max_rel_err": 1}
    assert m["cosine"] > 0.99999 and m["max_rel_err"] < 0.005, \
        f"a bfloat16 file compares with its float32 source within bfloat16 rounding: {m}"
    big = os.path.join(scratch, "big")
    d.write_dump(big, {0: d.simple_net(n=1, size=(1000, 1000))})
    big_file = npy_file(big, "layer0")
    values = np.ones(1000000, dtype=np.float32)
    values[123456] = np.nan
    os.remove(big_file)
    np.save(big_file, (values.view(np.uint32) >> 16).astype(np.uint16).reshape(1000, 1000))
    with open(big_file, "r+b") as f:
        header = f.read(128)
        f.seek(header.index(b"'<u2'"))
        f.write(b"'<E2'")
    code, out, err = run("watch", big, "--check", "nan", "--json")
    assert code == 1, f"watch reads the 1M-element bfloat16 file: {err[-300:]}"
    hits = parse(out, "watch").get("hits", [])
    outputs = [h for h in hits if h["io"] == "output"]
    assert ([h["detail"] for h in outputs] == [
       "1 NaN of 1000000 elements; first at [123, 456], row 123 (1 of 1000 rows)"] and
            outputs[0]["first_index"] == [123, 456]), \
        f"one NaN among a million bfloat16 values, at its position: {hits}"

    # 3. Bytes that are not UTF-8 in a file name or a statistic.csv field aborted --json.
    odd = os.path.join(scratch, "odd")
    odd_net = d.simple_net(n=3, size=(64, 32))
    odd_net[1]["outputs"][0][0, 0] = np.nan  # so that watch reports the file by its odd name
    d.write_dump(odd, {0: odd_net}, stats=True)
    step = os.path.join(odd, "rank_0", "Net", "0", "0")
    victim = npy_file(odd, "layer1")
    os.rename(victim.encode(), victim.encode().replace(b"layer1", b"layer\xff1"))
    csv = os.path.join(step, "statistic.csv")
    with open(csv, "rb") as f:
        text = f.read()
    write_bytes(csv, text.replace(b"layer2", b"layer\xfe2"))
    for command in (["ls", odd, "--json", "--kernels"], ["watch", odd, "--check", "nan", "--json"],
                    ["compare", odd, b, "--json"]):
        p = subprocess.run([t.BIN, *command], capture_output=True, timeout=LIMIT)
        assert p.returncode in (0, 1), f"{command[0]} --json exits normally: {p.stderr[-300:]}"
        try:
            parsed = json.loads(p.stdout.decode("utf-8"))  # strict: valid UTF-8 or it raises
            assert "\ufffd" in json.dumps(parsed, ensure_ascii=False), \
                f"{command[0]}: the odd bytes are replaced by U+FFFD"
        except ValueError as e:
            pytest.fail(f"{command[0]} --json prints valid UTF-8 JSON: {e}")
    # The report page declares UTF-8 and carried the raw bytes.
    page = os.path.join(scratch, "odd.html")
    code, out, err = run("report", odd, "-o", page)
    assert code == 0, f"report of the odd dump: {err[-300:]}"
    if os.path.exists(page):
        with open(page, "rb") as f:
            html = f.read()
        try:
            text = html.decode("utf-8")  # strict
            assert "layer\ufffd1" in text, "report: the odd byte is U+FFFD on the page"
        except UnicodeDecodeError as e:
            pytest.fail(f"report writes a UTF-8 page: {e}")

    # 11. --input-shape 2x8x was taken as 2x8 (the empty size dropped).
    for shape, part in (("2x8x", "an empty size"), ("2xx8", "an empty size"),
                        ("x2", "an empty size"), ("2x8y", "'8y' is not a size")):
        code, out, err = run("run", gdmodels.model_path("mlp"), "--input-shape", shape)
        assert code == 2, f"--input-shape {shape} is refused"
        assert (f"--input-shape '{shape}': {part}; it must be positive sizes separated by 'x'"
                in err and "step 1/" not in out), f"--input-shape {shape}: says why: {err[-300:]}"

    # 4. A FIFO under a tensor (or statistic.csv, mapping.csv, graph) name blocked compare and
    # watch forever; run --input FIFO blocked, run --input /dev/zero grew memory.
    fifo_dump = os.path.join(scratch, "fifo")
    d.write_dump(fifo_dump, {0: net}, stats=True, long_names=True)
    step = os.path.join(fifo_dump, "rank_0", "Net", "0", "0")
    fifo_tensor = npy_file(fifo_dump, "layer2")
    replaced = [fifo_tensor, os.path.join(step, "statistic.csv"), os.path.join(step, "mapping.csv"),
                os.path.join(fifo_dump, "rank_0", "graphs", "ms_output_trace_code_graph_0.ir")]
    for path in replaced:
        os.remove(path)
        os.mkfifo(path)
    code, out, err = run("compare", fifo_dump, b, "--json")
    assert code in (0, 1), f"compare finishes with FIFOs in the dump: {err[-300:]}"
    if code is not None:
        skipped = [s["path"] + ": " + s["reason"] for s in parse(out, "compare").get("skipped", [])]
        for path in replaced:
            assert any(s.startswith(path) and "it is a FIFO, not a regular file" in s
                       for s in skipped), f"compare lists {os.path.basename(path)}: {skipped}"
    code, out, err = run("watch", fifo_dump, "--check", "nan", "--json")
    # Skipped files are listed, not a failure: watch exits 1 only on hits (docs/analysis.md).
    assert code == 0, f"watch finishes with FIFOs in the dump: {err[-300:]}"
    if code is not None:
        assert any("it is a FIFO" in s["reason"] for s in parse(out, "watch").get("skipped", [])), \
            "watch lists the FIFO as skipped"
    fifo_input = os.path.join(scratch, "input_fifo.npy")
    os.mkfifo(fifo_input)
    for source in (fifo_input, "/dev/zero"):
        code, out, err = run("run", gdmodels.model_path("mlp"), "--input", source)
        assert code == 2, f"run --input {source} is refused"
        assert f"input file {source} is not a regular file" in err, f"and named: {err[-300:]}"

    # 5. A FRACTAL_Z file whose original_shape product wraps int64: convert wrote a .npy that
    # did not load and exited 0.
    pb = make_ascend_dump.load_proto_module()
    dump = pb.DumpData()
    dump.version = "2.0"
    dump.op_name = "Default/Conv2D-op1"
    out_tensor = dump.output.add()
    out_tensor.data_type = 2  # FLOAT16
    out_tensor.format = 4  # FRACTAL_Z
    out_tensor.shape.dim.extend([1, 1, 16, 16])
    out_tensor.original_shape.dim.extend([1 << 32, 1 << 32, 1, 1])
    out_tensor.size = 16 * 16 * 2
    header = dump.SerializeToString()
    wrap_dir = os.path.join(scratch, "wrap")
    os.makedirs(wrap_dir)
    write_bytes(os.path.join(wrap_dir, "Conv2D.Default_Conv2D-op1.0.0.1700"),
                len(header).to_bytes(8, "little") + header + bytes(16 * 16 * 2))
    converted = os.path.join(scratch, "wrap_npy")
    code, out, err = run("convert", wrap_dir, "-o", converted, "-f", "NCHW")
    assert code == 3, "convert fails on the file"
    assert ("output[0].original_shape: the element count of (4294967296,4294967296,1,1) "
            "overflows" in err), f"naming the field: {err[-300:]}"
    assert (glob.glob(os.path.join(converted, "**", "*.npy"), recursive=True) ==
            []), "and writes no .npy"

    # A statistic.csv Shape of (-1,-1) made watch say "all 1 elements are zero".
    neg = os.path.join(scratch, "neg")
    d.write_dump(neg, {0: net}, files=False, stats=True)
    csv = os.path.join(neg, "rank_0", "Net", "0", "0", "statistic.csv")
    with open(csv) as f:
        text = f.read()
    with open(csv, "w") as f:
        f.write(text.replace('"(64,32)"', '"(-1,-1)"'))
    code, out, err = run("watch", neg, "--check", "zero", "--json")
    result = parse(out, "watch")
    assert not any("elements are zero" in h["detail"] for h in result.get("hits", [])), \
        f"no zero hit from a negative shape: {result.get('hits')}"
    assert any("Shape is '(-1,-1)'" in s["reason"] for s in result.get("skipped", [])), \
        f"the row is refused, naming the shape: {result.get('skipped')}"

    # 9. watch took quadratic time in the tensors of one Ascend dump file (20,000: over 20 s).
    # Its result over 20,000 tensors is checked here; docs/reliability.md gives the timings.
    many = os.path.join(scratch, "many", "20261122010203", "0", "net", "0", "0")
    os.makedirs(many)
    dump = pb.DumpData()
    dump.version = "2.0"
    dump.op_name = "Default/Fused-op1"
    payload = []
    for i in range(20000):
        o = dump.output.add()
        o.data_type = 1  # FLOAT
        o.format = 2  # ND
        o.shape.dim.extend([2])
        o.original_shape.dim.extend([2])
        o.size = 8
        payload.append(np.array([i, np.nan if i % 1000 == 0 else -i], dtype=np.float32).tobytes())
    header = dump.SerializeToString()
    write_bytes(os.path.join(many, "Fused.Default_Fused-op1.0.0.1700"),
                len(header).to_bytes(8, "little") + header + b"".join(payload))
    code, out, err = run("watch", os.path.join(scratch, "many"), "--check", "nan", "--json")
    assert code == 1, f"watch over 20,000 tensors of one file: {err[-300:]}"
    if code is not None:
        result = parse(out, "watch")
        assert result.get("tensors_checked") == 20000, "every tensor is checked"
        assert len(result.get("hits", [])) == 20, "one NaN hit per 1,000 tensors"


def test_wide_statistic_csv_is_refused_in_seconds(scratch):
    """A 2.3 MB statistic.csv whose header has 200,000 columns took 80-94 s per command (a
    quadratic scan for titles given twice) and report over 120 s. Each command now refuses it
    at once, naming the file and the limit (1,024 columns, docs/file-format.md), and reads the
    rest of the dump."""
    import time
    net = d.simple_net(n=4)
    wide = os.path.join(scratch, "wide")
    d.write_dump(wide, {0: net, 1: net}, files=False, stats=True)
    csv = os.path.join(wide, "rank_0", "Net", "0", "1", "statistic.csv")
    titles = "".join(",Value %06d" % i for i in range(200000 - 14))
    with open(csv, "w") as f:
        f.write(d.STAT_HEADER.rstrip("\n") + titles + "\n")
    assert os.path.getsize(csv) > 2_300_000
    message = csv + ":1: statistic.csv header has 200000 columns; at most 1024 are read"
    report = os.path.join(scratch, "r.html")
    for args in (["ls", wide, "--json"], ["watch", wide, "--json"], ["watch", wide],
                 ["compare", wide, wide, "--json"], ["trace", wide, "model.py:10"],
                 ["report", wide, "-o", report]):
        began = time.monotonic()
        p = subprocess.run([t.BIN, *args], capture_output=True, text=True, timeout=LIMIT)
        seconds = time.monotonic() - began
        assert seconds < 10, f"{args[0]} took {seconds:.1f} s"
        assert p.returncode in (0, 1), (args, p.stderr[-300:])
        if args[0] not in ("trace", "report"):  # which list no skipped file
            assert message in p.stdout + p.stderr, (args, p.stderr[-300:])
    # Iteration 0 was read: its 8 statistic rows were checked.
    code, out, err = run("watch", wide, "--json")
    assert parse(out, "watch")["tensors_checked"] == 8, out[:300]
