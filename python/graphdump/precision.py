"""Precision runs of a script: ``graphdump python --precision bf16|fp16 [--keep-fp32 ENTRY...]
[--steps N]`` (docs/precision.md, "Precision runs of a script").

The kernels themselves are cast in C++, at the dispatcher (the host's set_precision); this module
holds what the Python side adds: which module's output is "the script's output" (the last call
of the first module the script calls from outside any other), stopping after N steps, the
check that every --keep-fp32 entry matched something, and the files ``graphdump bisect -- script``
reads ($GRAPHDUMP_PRECISION_OUT: run.json and output_{i}.npy).
"""
import json
import os
import sys
import threading

import torch
import torch.nn.utils.clip_grad as _clip_grad

PRECISIONS = ("bf16", "fp16", "fp32")


class StepsDone(SystemExit):
    """Raised after the N-th step of ``--steps N``: the script ends there, as with exit(0)."""

    def __init__(self):
        super().__init__(0)


class PrecisionRun:
    """precision: 'bf16', 'fp16' or 'fp32' (the script as it is: the reference of a bisection);
    keep: --keep-fp32 entries; steps: stop after this many steps (None: run to the end);
    out_dir: where the output and the kernels of the run are written (None: nowhere)."""

    def __init__(self, precision, keep=(), steps=None, out_dir=None):
        self.precision = precision
        self.keep = list(keep)
        self.steps = steps
        self.out_dir = out_dir
        self.busy = False  # a module call from outside any module is running
        self.root = None  # the first module called from outside any module (a weak identity)
        self.output = None  # its last call's floating tensors, float32 copies
        self.steps_done = 0
        self.root_calls = 0
        self.host = None
        self._clip_grouping = None  # clip_grad's own grouping while the run replaces it

    def takes(self, dump):
        """Is a module call now one of the run's root calls: from outside any module, on the
        thread and in the process the dump watches? Other threads and forked children (a
        DataLoader's workers) run their modules as they are, in their own dtypes."""
        return (not self.busy and threading.get_ident() == dump._thread and
                os.getpid() == dump._pid)

    def closure(self, host, args, kwargs):
        """(args, kwargs, box) of an optimizer's step(closure) (LBFGS) while the update runs
        paused (its operators are no kernels): the closure's own forward and backward are the
        script's, so it runs unpaused, as a step without a closure would have run them.
        box[0] is the pause open after the step (close it)."""
        box = [host.pause_eager()]
        given = args[0] if args else kwargs.get("closure")
        if not callable(given):
            return args, kwargs, box

        def closure():
            box[0].close()
            try:
                return given()
            finally:
                box[0] = host.pause_eager()
        if args:
            return (closure,) + tuple(args[1:]), kwargs, box
        return args, {**kwargs, "closure": closure}, box

    def module_inputs(self, host, args, kwargs):
        """(args, kwargs) as a module of the run gets them: floating tensors of another dtype
        (the script's float32 data) in the run's dtype, as a bfloat16 model gets bfloat16 data,
        so that the module's own Python checks (nn.GRU's input dtype against its weights') see
        the dtype its kernels compute in; tensors the run keeps in float32 (kept parameters,
        kept kernels' outputs) go as they are. The casts are not kernels."""
        if self.precision == "fp32":
            return args, kwargs
        pause = host.pause_eager()
        try:
            def cast(value):
                if isinstance(value, torch.Tensor):
                    dtype = host.precision_module_input(value)
                    return value.to(getattr(torch, dtype)) if dtype else value
                if isinstance(value, tuple) and not hasattr(value, "_fields"):
                    return tuple(cast(v) for v in value)
                if isinstance(value, list):
                    return [cast(v) for v in value]
                if type(value) is dict:
                    return {k: cast(v) for k, v in value.items()}
                return value
            return cast(tuple(args)), cast(dict(kwargs))
        finally:
            pause.close()

    def start(self, host):
        """The host opened (at the first module call): bf16/fp16 turns the kernels' casts on."""
        self.host = host
        if self.precision != "fp32":
            host.set_precision(self.precision, self.keep)
            self._clip_grouping = _clip_grad.__dict__.get("_group_tensors_by_device_and_dtype")
            if self._clip_grouping is not None:
                _clip_grad._group_tensors_by_device_and_dtype = _group_by_device

    def root_call(self, module, call, args, kwargs):
        """Runs `call(module, *args, **kwargs)`, a call from outside any module; keeps the
        output of the first module's calls."""
        self.busy = True
        try:
            out = call(module, *args, **kwargs)
        finally:
            self.busy = False
        if self.host is None:
            return out  # the module ran without graphdump (a forked child, a closed dump)
        pause = self.host.pause_eager()  # graphdump's own operators are no kernels
        try:
            if self.precision != "fp32":
                # A module returns the run's dtype, whatever kernel made it (run --precision).
                out = _to_dtype(out, _DTYPES[self.precision])
            if self.root is None:
                self.root = id(module)
            if id(module) == self.root:
                tensors = []
                _floating_tensors(out, tensors)
                self.output = [t.detach().to(torch.float32).cpu().clone() for t in tensors]
                self.root_calls += 1
        finally:
            pause.close()
        return out

    def after_root_call(self, optimizers):
        """Without an optimizer, each call of the first module is a step."""
        if not optimizers and self.steps is not None and self.root_calls >= self.steps:
            raise StepsDone()

    def after_step(self):
        self.steps_done += 1
        if self.steps is not None and self.steps_done >= self.steps:
            raise StepsDone()

    def finish(self, host):
        """At the script's end: writes the files for bisect; returns the error messages of
        --keep-fp32 entries that matched nothing (the run is then a usage error)."""
        if self._clip_grouping is not None:
            _clip_grad._group_tensors_by_device_and_dtype = self._clip_grouping
            self._clip_grouping = None
        unmatched = host.precision_unmatched() if host is not None else [
            f"--keep-fp32 '{entry}' matches nothing: the script called no torch.nn.Module"
            for entry in self.keep]
        if self.out_dir is not None:
            report = json.loads(host.precision_report() or "{}") if host is not None else {}
            report.setdefault("precision", self.precision)
            report.setdefault("kernels", [])
            report.setdefault("states", [])
            report["outputs"] = len(self.output or [])
            report["root_calls"] = self.root_calls
            report["steps"] = self.steps_done
            import numpy as np
            for i, t in enumerate(self.output or []):
                _save_whole(os.path.join(self.out_dir, f"output_{i}.npy"),
                            lambda f, t=t: np.save(f, t.numpy()))
            _save_whole(os.path.join(self.out_dir, "run.json"),
                        lambda f: f.write(json.dumps(report).encode()))
        return unmatched


def _group_by_device(tensorlistlist, with_indices=False):
    """torch.nn.utils.clip_grad's grouping of gradients in a bf16/fp16 run: by device only, in
    their order, where torch groups them by device and dtype. A parameter kept in float32 has a
    float32 gradient among bfloat16 ones, which would split clip_grad_norm_'s `_foreach_norm`
    and `_foreach_mul_` into one call per dtype: the script would call other kernels than its
    float32 run and the other rounds of a bisection (docs/precision.md, "Kernel identity"). The
    one call computes as the two would: its floating inputs are cast as any kernel's are. A
    group's key holds its first tensor's dtype."""
    groups = {}
    first = tensorlistlist[0]
    for i, t in enumerate(first):
        if t is None:
            continue
        key = t.device
        if key not in groups:
            groups[key] = (t.dtype, [])
        groups[key][1].append(i)
    return {(device, dtype): ([[tensors[i] for i in indices] for tensors in tensorlistlist],
                              indices if with_indices else [])
            for device, (dtype, indices) in groups.items()}


def _save_whole(path, write):
    """Writes through a new temporary name, so the file is whole or absent, and never through a
    link planted at either name (_whole_file.py)."""
    from ._whole_file import write_whole
    write_whole(path, write)


_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _to_dtype(value, dtype):
    """`value` with its floating tensors of another dtype cast to `dtype`."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype != dtype else value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_to_dtype(v, dtype) for v in value)
    if isinstance(value, list):
        return [_to_dtype(v, dtype) for v in value]
    if type(value) is dict:
        return {k: _to_dtype(v, dtype) for k, v in value.items()}
    return value


def _floating_tensors(value, out):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _floating_tensors(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _floating_tensors(v, out)


def report_unmatched(messages):
    for message in messages:
        sys.stderr.write(f"graphdump python: error: {message}\n")
