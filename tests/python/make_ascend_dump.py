#!/usr/bin/env python3
"""Independent generator of Ascend asynchronous dump files (docs/ascend.md) for graphdump's tests.

It shares no code with graphdump: the DumpData message comes from proto/dump_data.proto
compiled here with `protoc --python_out`, and every device format is laid out by this file's
own NumPy code, written from the formulas of docs/ascend.md (host -> device, the opposite direction
of graphdump convert). Padding is filled with random garbage, so a converter that forgets to
crop cannot pass.

usage: make_ascend_dump.py OUT_DIR [--corrupt]

Writes OUT_DIR/dump/<dump files>, and for every tensor the array convert must produce:
  OUT_DIR/expected_host/{basename}.{io}.{i}.{d0xd1...}.npy   (convert -f NCHW)
  OUT_DIR/expected_device/{basename}.{io}.{i}.npy            (convert without -f)
Names over 255 bytes are left as they are in expected_*: the test maps them via mapping.csv.
With --corrupt, writes OUT_DIR/corrupt/<name> files that must be rejected, and
OUT_DIR/corrupt.txt with one line "<file name> <text the error must contain>" per file.
"""
import math
import os
import struct
import sys

import numpy as np

import proto_module

DT = {"float32": 1, "float16": 2, "int8": 3, "uint8": 4, "int32": 7, "int64": 8, "bfloat16": 27}
FMT = {"NCHW": 0, "ND": 2, "NC1HWC0": 3, "FRACTAL_Z": 4, "NC1C0HWPAD": 5, "NC1HWC0_C04": 12,
       "C1HWNCoC0": 25, "FRACTAL_ZZ": 28, "FRACTAL_NZ": 29, "NDC1HWC0": 32, "FRACTAL_Z_3D": 33}
RNG = np.random.default_rng(20261122)


def load_proto_module():
    """The Python classes of proto/dump_data.proto."""
    return proto_module.load("dump_data")


def ceil_div(a, b):
    return -(-a // b)


def host_tensor(dtype, shape):
    """Random host data; bfloat16 is returned as (uint16 bits, float32 values)."""
    if dtype == "int8":
        return RNG.integers(-128, 128, size=shape, dtype=np.int8)
    if dtype == "int64":
        return RNG.integers(-1 << 40, 1 << 40, size=shape, dtype=np.int64)
    values = RNG.standard_normal(size=shape).astype(np.float32) * 4
    if dtype == "float16":
        return values.astype(np.float16)
    if dtype == "bfloat16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    return values


def garbage(dtype, shape):
    """Device buffer filled with random bytes (stands for whatever padding held)."""
    item = np.dtype(np.uint16 if dtype == "bfloat16" else dtype).itemsize
    raw = RNG.integers(0, 256, size=int(np.prod(shape)) * item, dtype=np.uint8)
    out = raw.view(np.uint16 if dtype == "bfloat16" else dtype).reshape(shape).copy()
    if out.dtype == np.float16 or out.dtype == np.float32:  # keep NaN payloads out of the way
        out[~np.isfinite(out)] = 7
    return out


def c0_for(dtype):
    return 32 if dtype == "int8" else 16


def pad_to_4d(shape):
    nchw = [1, 1, 1, 1]
    if len(shape) >= 4:
        return list(shape)
    for i, d in enumerate(shape):
        nchw[1 + i] = d
    return nchw


# ---- host -> device layouts, one function per format (docs/ascend.md) ------------------------

def to_nc1hwc0(x, dtype, c0):
    n, c, h, w = pad_to_4d(x.shape)
    x = x.reshape(n, c, h, w)
    c1 = ceil_div(c, c0)
    dev = garbage(dtype, (n, c1, h, w, c0))
    for ci in range(c):  # dst[n,c,h,w] = src[n, c//C0, h, w, c%C0]
        dev[:, ci // c0, :, :, ci % c0] = x[:, ci, :, :]
    return dev


def to_ndc1hwc0(x, dtype, c0):
    n, c, d, h, w = x.shape
    c1 = ceil_div(c, c0)
    dev = garbage(dtype, (n, d, c1, h, w, c0))
    for ci in range(c):
        dev[:, :, ci // c0, :, :, ci % c0] = x[:, ci, :, :, :]
    return dev


def to_c1hwncoc0(x, dtype, c0):
    n, c, h, w = pad_to_4d(x.shape)
    x = x.reshape(n, c, h, w)
    c1 = ceil_div(c, c0)
    dev = garbage(dtype, (c1, h, w, n, c0, c0))
    for ci in range(c):  # the value sits on the (co, c0) diagonal
        dev[ci // c0, :, :, :, ci % c0, ci % c0] = x[:, ci, :, :].transpose(1, 2, 0)
    return dev


def to_fractal_z(x, dtype, c0, groups=1):
    """FRACTAL_Z / FRACTAL_Z_3D, GE's grouped layout; groups=1 is the plain formula of
    docs/ascend.md: dst[n,c,h,w] = src[((c/C0)·H + h)·W + w, n/N0, n%N0, c%C0]."""
    three_d = x.ndim == 5
    if not three_d:
        x = x.reshape(pad_to_4d(x.shape))
        x = x[:, :, None, :, :]  # N, C, D=1, H, W
    n_all, cg, d, h, w = x.shape
    n0 = 16
    cout = n_all // groups
    e_mult = min(math.lcm(math.lcm(cg, c0) // cg, math.lcm(cout, n0) // cout), groups)
    c1 = ceil_div(e_mult * cg, c0)
    n1 = ceil_div(e_mult * cout, n0)
    g_dim = ceil_div(groups, e_mult)
    dev = garbage(dtype, (g_dim, d, c1, h, w, n1 * n0, c0))
    # Cells of a group cube that no group uses are zero on the device (GE memsets first);
    # cells past the real channels of the last cube are padding.
    used = np.zeros(dev.shape, dtype=bool)
    for g in range(groups):
        e = g % e_mult
        for c in range(cg):
            ci = e * cg + c
            for n in range(cout):
                co = e * cout + n
                dev[g // e_mult, :, ci // c0, :, :, co, ci % c0] = x[g * cout + n, c]
                used[g // e_mult, :, ci // c0, :, :, co, ci % c0] = True
    if groups > 1:
        dev[~used] = 0
    return dev.reshape(g_dim * d * c1 * h * w, n1, n0, c0)


def to_fractal_nz(x, dtype, w0):
    shape = list(x.shape)
    lead = shape[:-2] if len(shape) >= 2 else []
    hh = shape[-2] if len(shape) >= 2 else 1
    ww = shape[-1]
    t = int(np.prod(lead)) if lead else 1
    h0 = 16
    h1, w1 = ceil_div(hh, h0), ceil_div(ww, w0)
    dev = garbage(dtype, (t, w1, h1 * h0, w0))
    xt = x.reshape(t, hh, ww)
    for wi in range(ww):  # dst[t,h,w] = src[t, w/W0, h/H0, h%H0, w%W0]
        dev[:, wi // w0, :hh, wi % w0] = xt[:, :, wi]
    return dev.reshape(lead + [w1, h1, h0, w0])


def to_device(fmt, x, dtype, groups):
    c0 = c0_for(dtype)
    if fmt == "NC1HWC0":
        return to_nc1hwc0(x, dtype, c0)
    if fmt == "NC1HWC0_C04":
        return to_nc1hwc0(x, dtype, 4)
    if fmt == "NDC1HWC0":
        return to_ndc1hwc0(x, dtype, c0)
    if fmt == "C1HWNCoC0":
        return to_c1hwncoc0(x, dtype, c0)
    if fmt in ("FRACTAL_Z", "FRACTAL_Z_3D"):
        return to_fractal_z(x, dtype, c0, groups)
    if fmt == "FRACTAL_NZ":
        return to_fractal_nz(x, dtype, c0)
    return x  # host formats, and unsupported ones stored as they are


# ---- cases ------------------------------------------------------------------------------------

# (op_type, op_name, [(io, format, dtype, host_shape, groups)])
CASES = [
    ("Conv2D", "Default/network-Net/conv1-Conv2d/Conv2D-op1", [
        ("input", "NC1HWC0", "float16", (2, 3, 4, 5), 1),
        ("input", "FRACTAL_Z", "float16", (17, 3, 3, 3), 1),
        ("output", "NC1HWC0", "float16", (2, 17, 2, 3), 1)]),
    ("Conv2D", "Default/network-Net/conv2-Conv2d/Conv2D-op2", [
        ("input", "NC1HWC0", "int8", (2, 33, 3, 4), 1),
        ("input", "FRACTAL_Z", "int8", (20, 40, 3, 3), 1),
        ("output", "NC1HWC0", "float16", (3, 32, 2, 2), 1)]),
    ("Conv2D", "Default/network-Net/grouped-Conv2d/Conv2D-op3", [
        ("input", "FRACTAL_Z", "float16", (8, 4, 3, 3), 2),
        ("input", "FRACTAL_Z", "float16", (24, 3, 2, 2), 8),
        ("input", "FRACTAL_Z", "int8", (12, 5, 1, 1), 3),
        ("output", "FRACTAL_Z", "float16", (33, 20, 1, 1), 1)]),
    ("Conv3D", "Default/network-Net/conv3d-Conv3d/Conv3D-op4", [
        ("input", "NDC1HWC0", "float16", (2, 17, 3, 4, 5), 1),
        ("input", "FRACTAL_Z_3D", "float16", (17, 5, 2, 3, 3), 1),
        ("input", "FRACTAL_Z_3D", "int8", (3, 33, 2, 2, 2), 1),
        ("output", "NDC1HWC0", "int8", (1, 40, 2, 3, 3), 1)]),
    ("MatMul", "Default/network-Net/dense-Dense/MatMul-op5", [
        ("input", "FRACTAL_NZ", "float16", (2, 3, 17, 20), 1),
        ("input", "FRACTAL_NZ", "int8", (33, 50), 1),
        ("input", "FRACTAL_NZ", "float16", (20,), 1),
        ("output", "FRACTAL_NZ", "float32", (3, 5, 40), 1)]),
    ("BNTrainingUpdate", "Default/network-Net/bn-BatchNorm2d/BNTrainingUpdate-op6", [
        ("input", "NC1HWC0", "bfloat16", (2, 18, 3, 3), 1),
        ("input", "C1HWNCoC0", "float16", (5, 17, 2, 3), 1),
        ("input", "NC1HWC0_C04", "float16", (2, 3, 4, 4), 1),
        ("input", "NC1HWC0", "float16", (17, 5), 1),
        ("output", "ND", "int64", (4, 6), 1),
        ("output", "NCHW", "float32", (2, 3, 2, 2), 1)]),
    ("Transpose", "Default/network-Net/odd-Odd/Transpose-op7", [
        ("input", "FRACTAL_ZZ", "float16", (4, 16, 16), 1),
        ("output", "NC1HWC0", "float16", (1, 20, 1, 1), 1)]),
    ("Add", "Default/" + "very_long_scope-Block/" * 9 + "Add-op8", [
        ("input", "NC1HWC0", "float16", (1, 5, 2, 2), 1),
        ("output", "ND", "float32", (3,), 1)]),
]


def sanitize(name):
    for ch in "/\\. ":
        name = name.replace(ch, "_")
    return name


def build_case(pb, case, timestamp):
    op_type, op_name, tensors = case
    msg = pb.DumpData()
    msg.version = "2.0"
    msg.dump_time = timestamp
    msg.op_name = op_name
    raw_in, raw_out, expected = [], [], []
    for io, fmt, dtype, shape, groups in tensors:
        host = host_tensor(dtype, shape)
        dev = np.ascontiguousarray(to_device(fmt, host, dtype, groups))
        t = msg.input.add() if io == "input" else msg.output.add()
        t.data_type = DT[dtype]
        t.format = FMT[fmt]
        t.shape.dim.extend(dev.shape)
        t.original_shape.dim.extend(shape)
        if groups > 1:
            t.sub_format = groups
        t.size = dev.nbytes
        (raw_in if io == "input" else raw_out).append(dev.tobytes())
        as_host = host.astype(np.uint32) << 16 if dtype == "bfloat16" else host
        if dtype == "bfloat16":
            as_host = as_host.astype(np.uint32).view(np.float32)
            dev_out = (dev.astype(np.uint32) << 16).view(np.float32)
        else:
            dev_out = dev
        converted = fmt not in ("FRACTAL_ZZ", "NC1C0HWPAD")
        host_out = as_host if converted else dev_out
        expected.append((io, host_out, dev_out))
    buffer = msg.buffer.add()
    buffer.buffer_type = 0
    buffer.size = 24
    header = msg.SerializeToString()
    data = struct.pack("<Q", len(header)) + header + b"".join(raw_in) + b"".join(raw_out)
    data += RNG.integers(0, 256, size=24, dtype=np.uint8).tobytes()
    basename = "{}.{}.{}.{}.{}".format(op_type, sanitize(op_name), 2, 7, timestamp)
    return basename, data, expected


def write_cases(pb, out_dir):
    for sub in ("dump", "expected_host", "expected_device"):
        os.makedirs(os.path.join(out_dir, sub), exist_ok=True)
    for k, case in enumerate(CASES):
        basename, data, expected = build_case(pb, case, 1700000000000000 + k)
        with open(os.path.join(out_dir, "dump", basename), "wb") as f:
            f.write(data)
        counters = {"input": 0, "output": 0}
        for io, host, dev in expected:
            i = counters[io]
            counters[io] += 1
            shape = "x".join(str(d) for d in host.shape)
            save(out_dir, "expected_host", "{}.{}.{}.{}.npy".format(basename, io, i, shape), host)
            save(out_dir, "expected_device", "{}.{}.{}.npy".format(basename, io, i), dev)


def save(out_dir, sub, name, array):
    """Saves array as sub/name; a name over 255 bytes is saved as sub/long_{n}.npy and listed
    as "long_{n}.npy,{name}" in sub/long_names.csv."""
    if len(name) > 255:
        listing = os.path.join(out_dir, sub, "long_names.csv")
        n = sum(1 for _ in open(listing)) if os.path.exists(listing) else 0
        with open(listing, "a") as f:
            f.write("long_{}.npy,{}\n".format(n, name))
        name = "long_{}.npy".format(n)
    np.save(os.path.join(out_dir, sub, name), array)


def write_corrupt(pb, out_dir):
    os.makedirs(os.path.join(out_dir, "corrupt"), exist_ok=True)
    _, good, _ = build_case(pb, CASES[0], 1700000000000000)
    (header_len,) = struct.unpack("<Q", good[:8])
    files = {}
    files["Short.short.0.0.1"] = (good[:5], "8-byte header length")
    files["Trunc.truncated.0.0.2"] = (good[:len(good) - 100], "input[0].size")
    files["Trunc.truncated.0.0.2"] = (good[:8 + header_len + 10], "input[0].size")
    files["Long.header_len.0.0.3"] = (struct.pack("<Q", 1 << 40) + good[8:], "header length")

    def rewrite(mutate):
        msg = pb.DumpData()
        msg.ParseFromString(good[8:8 + header_len])
        mutate(msg)
        header = msg.SerializeToString()
        return struct.pack("<Q", len(header)) + header + good[8 + header_len:]

    def bad_size(m):
        m.input[1].size += 2
    files["Size.bad_size.0.0.4"] = (rewrite(bad_size), "input[1].size")

    def bad_dtype(m):
        m.output[0].data_type = 99
    files["Dtype.bad_dtype.0.0.5"] = (rewrite(bad_dtype), "output[0].data_type")

    def bad_format(m):
        m.input[0].format = 77
    files["Format.bad_format.0.0.6"] = (rewrite(bad_format), "input[0].format")
    files["Garbage.not_proto.0.0.7"] = (struct.pack("<Q", 16) + b"\xff" * 16, "DumpData")
    with open(os.path.join(out_dir, "corrupt.txt"), "w") as listing:
        for name, (data, expect) in sorted(files.items()):
            with open(os.path.join(out_dir, "corrupt", name), "wb") as f:
                f.write(data)
            listing.write("{} {}\n".format(name, expect))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    pb = load_proto_module()
    write_cases(pb, sys.argv[1])
    if "--corrupt" in sys.argv[2:]:
        write_corrupt(pb, sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
