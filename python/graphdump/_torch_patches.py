"""graphdump.torch's patches of PyTorch while a Dump is on: module calls (plain modules
bracketed for the eager capture, TorchScript modules run through graphdump's executor),
backward passes, and, with auto, optimizer construction. DistributedDataParallel's are
_torch_ddp.py's. Not an API."""
import contextlib
import os
import sys

import torch

from . import _compiled, _torch_ddp, _torch_optimizer
from . import _torch_state as _state
from ._torch_state import NOT_RUN as _NOT_RUN
from ._torch_state import TRANSPARENT as _TRANSPARENT
from ._torch_state import dumping_host as _dumping_host
from ._torch_state import log as _log

_patches = []  # (owner, attribute name, original value or _MISSING)
_MISSING = object()


def _patch(owner, name, value):
    _patches.append((owner, name, owner.__dict__.get(name, _MISSING)))
    setattr(owner, name, value)


def install(auto):
    ddp = torch.nn.parallel.DistributedDataParallel
    _patch(torch.nn.Module, "__call__", _eager_call)
    _patch(torch.jit.ScriptModule, "__call__", _script_call)
    _patch(torch.autograd, "backward", _backward)
    _patch(torch.autograd, "grad", _grad)
    _patch(ddp, "__init__", _torch_ddp.ddp_init)
    _patch(ddp, "register_comm_hook", _torch_ddp.ddp_register_comm_hook)
    _patch(torch, "compile", _compile)
    _patch(torch.UntypedStorage, "resize_", _storage_resize)
    if auto:
        _patch(torch.optim.Optimizer, "__init__", _optimizer_init)
    if "torch._dynamo" in sys.modules and _state.active.enabled:
        # The script may have called torch.compile already: what it compiled is compiled at
        # its first call, which is to be dumped as the compiled graphs it makes.
        _compiled.watch_compiles()


def uninstall():
    _compiled.uninstall()
    while _patches:
        owner, name, original = _patches.pop()
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


_module_call = torch.nn.Module.__call__
_torch_compile = torch.compile


def _compile(*args, **kwargs):
    """torch.compile, with Inductor's code instrumented for the dump (graphdump/_compiled.py)
    when it dumps in this process."""
    if _state.active is not None and _state.active.enabled:
        _compiled.install()
    target = args[0] if args else kwargs.get("model")
    root = target if isinstance(target, torch.nn.Module) else getattr(target, "__self__", None)
    if isinstance(root, torch.nn.Module):
        _state.compiled_roots.add(root)
    return _torch_compile(*args, **kwargs)


_untyped_storage_resize = torch.UntypedStorage.resize_


def _storage_resize(storage, size):
    """UntypedStorage.resize_ (FSDP frees and restores a parameter's memory with it): it changes
    the bytes without an operator, so statistics still queued for them are read first."""
    dump = _state.active  # on any thread, and between dumped steps: reads may be queued
    if dump is not None and dump._host is not None and os.getpid() == dump._pid:
        dump._host.before_storage_change(storage._cdata)
    return _untyped_storage_resize(storage, size)


_autograd_backward = torch.autograd.backward
_autograd_grad = torch.autograd.grad
_optimizer_init_original = torch.optim.Optimizer.__init__


def _script_call(module, *args, **kwargs):
    if torch.compiler.is_compiling():  # Dynamo traces the module's own call
        return _module_call(module, *args, **kwargs)
    dump = _state.active
    if dump is not None and dump._precision is not None and dump._precision.takes(dump):
        out = dump._precision.root_call(module, _script_call, args, kwargs)
        dump._precision.after_root_call(len(dump._optimizers))
        return out
    if dump is not None and dump._routes(module):
        out = dump._call(module, args, kwargs)
        if out is not _NOT_RUN:
            return out
    return _module_call(module, *args, **kwargs)


def _eager_call(module, *args, **kwargs):
    if torch.compiler.is_compiling():  # Dynamo traces the module's own call
        return _module_call(module, *args, **kwargs)
    dump = _state.active
    if dump is not None and dump._precision is not None and dump._precision.takes(dump):
        out = dump._precision.root_call(module, _eager_call, args, kwargs)
        dump._precision.after_root_call(len(dump._optimizers))
        return out
    host = dump._eager_host() if dump is not None else None
    if host is None or isinstance(module, _TRANSPARENT) or host.skips_nested_module():
        # Inside a module call of a step that names no kernel, a module's frame names nothing:
        # the call runs as it is (a step that dumps nothing costs the root's call alone).
        return _module_call(module, *args, **kwargs)
    if not host.enter_module(module):  # a module called from outside any other, not yet known
        if dump._takes_root(module):
            dump._add_eager(module)
            host.enter_module(module)
        else:
            host.enter_uncaptured()
    try:
        if dump._precision is not None:
            args, kwargs = dump._precision.module_inputs(host, args, kwargs)
        return _module_call(module, *args, **kwargs)
    except BaseException as e:
        # The script sees the exception as PyTorch raised it; which kernel failed, and where,
        # is graphdump's to say (its log, the dump's INCOMPLETE marker should the exception end
        # the script; with op_debug_mode 4 the dump holds the inputs).
        failure = host.take_failure()
        if failure:
            _log(failure)
            dump._note_kernel_failure(e, failure)
        raise
    finally:
        host.exit_module()


def _backward_roots(args, kwargs):
    """(args, kwargs, roots): the tensors a backward pass starts from, and the arguments to pass
    on, unchanged except for `tensors` given as an iterator (a generator): consumed here once
    into the tuple that torch.autograd.backward itself makes of it first, which is passed on."""
    in_kwargs = not args and "tensors" in kwargs
    if not args and not in_kwargs:
        return args, kwargs, []
    tensors = kwargs["tensors"] if in_kwargs else args[0]
    if isinstance(tensors, torch.Tensor):
        return args, kwargs, [tensors]
    if isinstance(tensors, torch.autograd.graph.GradientEdge):
        return args, kwargs, []
    if not isinstance(tensors, (list, tuple)):
        try:
            iter(tensors)
        except TypeError:
            return args, kwargs, []  # not a sequence: torch.autograd.backward says so
        tensors = tuple(tensors)
        if in_kwargs:
            kwargs = dict(kwargs, tensors=tensors)
        else:
            args = (tensors,) + tuple(args[1:])
    return args, kwargs, [t for t in tensors if isinstance(t, torch.Tensor)]


def _autograd_call(dump):
    """A context around the program's torch.autograd.backward/grad: what autograd runs on the
    watched thread meanwhile (the seed gradient's ones_like, the engine's casts of gradients to
    their nodes' dtypes) is not kernels (docs/precision.md, "Kernel identity"); it does nothing
    when nothing names kernels here."""
    host = _state.naming_host(dump)
    return contextlib.closing(host.autograd_call()) if host is not None else \
        contextlib.nullcontext()


def _backward(*args, **kwargs):
    dump = _state.active
    with _autograd_call(dump):
        host = _dumping_host(dump)
        if host is None:
            try:
                return _autograd_backward(*args, **kwargs)
            finally:
                _end_backward_steps(dump)
        args, kwargs, roots = _backward_roots(args, kwargs)
        backward_pass = host.hook_backward(roots)
        try:
            return _autograd_backward(*args, **kwargs)
        finally:
            backward_pass.close()
            dump._flush_allreduce()
            _end_backward_steps(dump)


def _end_backward_steps(dump):
    """A backward pass ended: optimizers that stepped inside it (in gradient hooks) end their
    training step now, unless this was a backward inside a backward."""
    if dump is not None and torch._C._current_graph_task_id() == -1:
        _torch_optimizer.end_backward_steps(dump)


def _grad(*args, **kwargs):
    with _autograd_call(_state.active):
        return _autograd_grad(*args, **kwargs)


def _optimizer_init(optimizer, *args, **kwargs):
    _optimizer_init_original(optimizer, *args, **kwargs)
    if _state.active is not None and _state.active._auto:
        _torch_optimizer.track(_state.active, optimizer)
