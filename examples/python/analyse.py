"""Reading a dump from Python (docs/python.md): what was saved, the first NaN or overflow, and
a tensor as a NumPy array.

    PYTHONPATH=build/python .venv/bin/python examples/python/analyse.py \\
        /tmp/graphdump_python_demo/dump
"""
import sys

import graphdump


def main():
    path = sys.argv[1]
    tensors = graphdump.load(path)  # one row per dumped tensor
    kernels = tensors[~tensors.is_parameter & (tensors.iteration >= 0)]
    print(f"{len(tensors)} tensors, {kernels.kernel.nunique()} kernels, "
          f"iterations {sorted(set(kernels.iteration))}")
    print(kernels.groupby("op_type").size().sort_values(ascending=False).head(5).to_string())

    forward = kernels[~kernels.kernel.str.startswith(("Gradients/", "Default/optimizer"))]
    biggest = forward[forward.io == "output"].sort_values("Max Value").iloc[-1]
    array = graphdump.read(biggest)  # numpy.ndarray
    print(f"largest forward output: {biggest.kernel} ({biggest.source}): shape {array.shape}, "
          f"max {array.max():.4f}")

    hits = graphdump.watch(path, "nan,inf,overflow")
    print("no NaN or overflow" if hits.empty else f"first hit: {hits.iloc[0].to_dict()}")


if __name__ == "__main__":
    main()
