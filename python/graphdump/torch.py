"""graphdump.torch: dump the kernels of a PyTorch training your own script drives
(docs/python.md).

    import graphdump.torch as gd

    with gd.Dump("data_dump.json") as dump:          # or gd.Dump(): $GRAPHDUMP_CONFIG
        model = dump.wrap(torch.jit.script(net))     # forward through graphdump's executor
        dump.track(optimizer)                        # optimizer kernels, iteration boundaries
        dump.set_dump(model.features)                # dump_mode 2 (MindSpore's set_dump)
        for x, y in loader: ...                      # your loop, loss, scheduler, clipping

What is dumped, and how iterations are counted, is graphdump's C++ (graphdump::DumpHost); this
module only connects it to PyTorch's Python objects:
  - a plain module's calls (torch.nn.Module.__call__) are bracketed so that the C++ eager
    capture, which sees every ATen operator at the dispatcher, knows each operator's module;
    a module called from outside any other module is a graph;
  - a TorchScript module's calls (torch.jit.ScriptModule.__call__) run its forward graph
    through graphdump's executor;
  - graphs are numbered in wrap order (or first-call order with ``graphdump python``);
  - backward passes (torch.autograd.backward, and so Tensor.backward) are hooked so that their
    autograd nodes are dumped as Gradients/... kernels;
  - each step() of a tracked optimizer dumps one update kernel per parameter and ends the
    iteration; without one, each call of the first module starts a new iteration;
  - a DistributedDataParallel over a wrapped module gets a communication hook that all-reduces
    as DDP does and dumps the all-reduce as kernels.
Nothing here copies or changes what the training computes: eager modules run as they are, the
executor runs the same ATen kernels TorchScript would, and tensors are copied only for the dump.
"""
import atexit
import os
import sys
import threading
import weakref

import torch

from . import _graphdump as _C
from . import _torch_ddp, _torch_optimizer, _torch_patches
from . import _torch_state as _state
from ._graphdump import ConfigError
from ._torch_state import NOT_RUN as _NOT_RUN
from ._torch_state import TRANSPARENT as _TRANSPARENT
from ._torch_state import log as _log
from ._torch_state import rank as _rank

__all__ = ["Dump", "ConfigError", "active"]


def active():
    """The Dump that is on in this process, or None."""
    return _state.active


def _script_name():
    main = sys.argv[0] if sys.argv and sys.argv[0] else ""
    stem = os.path.splitext(os.path.basename(main))[0]
    return stem if stem and stem != "-c" else "model"


def _not_a_module(module, what):
    name = type(module).__name__
    if isinstance(module, _TRANSPARENT):
        return TypeError(f"{what}: got {name}; wrap the module inside it: "
                         f"{name}(dump.wrap(net)) (docs/python.md)")
    return TypeError(f"{what}: expected a torch.nn.Module (plain or TorchScript), got {name} "
                     "(docs/python.md)")


def _describe_exception(exc_type, exc):
    """'ValueError: message', as Python's last traceback line says it."""
    text = str(exc)
    return f"{exc_type.__name__}: {text}" if text else exc_type.__name__


class Dump:
    """A dump of this process's training, on between start() and close() (or in a ``with``).

    config: a data_dump.json path (MindSpore's dialect or the GE dialect, docs/configuration.md);
      None reads $GRAPHDUMP_CONFIG, else $MINDSPORE_DUMP_CONFIG, and with neither set dumping is
      off and the training runs untouched. The file is validated here: ConfigError lists every
      problem.
    auto: dump every module the process calls (plain modules through the eager capture,
      TorchScript modules through the executor) and track every optimizer it creates (what
      ``graphdump python`` does), instead of only those given to wrap() and track().
    name: the net name when the configuration leaves it empty (the GE dialect): default the
      script's file name.
    overwrite: replace an earlier dump in the rank's directory ({path}/rank_{id}) instead of
      raising ConfigError (one run per directory, docs/layout.md); default: true when
      $GRAPHDUMP_OVERWRITE is 1 (``graphdump python --overwrite`` sets it).

    The dump directory of a rank is opened at the first call of a dumped module, when the rank
    is known (torch.distributed's, else $RANK, else 0); a rank outside support_device runs
    undumped.
    """

    def __init__(self, config=None, *, auto=False, name=None, overwrite=None):
        self._config = _C.load_config(None if config is None else os.fspath(config))
        self._auto = auto
        self._overwrite = (os.environ.get("GRAPHDUMP_OVERWRITE") == "1" if overwrite is None
                           else bool(overwrite))
        self._name = name or _script_name()
        self._pid = os.getpid()
        # The thread whose training is captured (docs/reliability.md, "Threads"): the eager
        # capture watches it; other threads' modules, backward passes and steps run untouched.
        self._thread = threading.get_ident()
        self._started = False
        self._closed = False
        self._host = None
        self._host_opened = False
        self._summary = None
        self._error = ""
        self._off_reason = ("" if self._config is not None else
                            "no configuration: GRAPHDUMP_CONFIG and MINDSPORE_DUMP_CONFIG unset")
        self._wrapped = []  # in wrap order: their graph ids
        self._wrapped_set = weakref.WeakSet()
        self._unroutable = weakref.WeakSet()  # modules the executor cannot run
        self._registered = weakref.WeakSet()  # modules the host has compiled
        self._eager_roots = []  # plain modules with a graph of their own, kept alive
        self._eager = None  # the host while it dumps eager modules in this process
        self._pending_set_dump = []
        self._compiled_set_dump = []  # set_dump's modules, for the compiled kernels under them
        self._optimizers = weakref.WeakSet()
        self._stepped = set()  # id() of the optimizers that stepped in the open iteration
        # An optimizer stepped inside the running backward pass (in a gradient hook): the
        # training step ends with that pass (_torch_optimizer.end_backward_steps).
        self._stepped_in_backward = False
        self._own = weakref.WeakSet()  # optimizers that stepped on the capturing thread
        # Each optimizer's number in graphs/hyperparameters.jsonl: 0, 1, ... by first step.
        self._optimizer_numbers = weakref.WeakKeyDictionary()
        self._optimizers_numbered = 0
        self._foreign = weakref.WeakSet()  # optimizers that stepped on another thread
        self._routed_parameters = set()  # ids of the parameters of modules run here
        self._warned_unowned = False
        self._open_failed = False  # the session refused to open (ConfigError raised)
        self._pending_allreduce = []
        self._precision = None  # a PrecisionRun (graphdump python --precision; precision.py)
        # The last exception a failing kernel raised out of a module, as _describe_exception
        # says it, and the kernel: for INCOMPLETE, should that exception end the script.
        self._kernel_failure = None
        if self._config is not None:
            for warning in self._config.warnings:
                _log(f"warning: {warning}")

    # --- state -----------------------------------------------------------------------------

    @property
    def enabled(self):
        """False when nothing is dumped here (no configuration, enable_dump false, or this rank
        outside support_device; see off_reason). Until the first module call the rank can still
        change (torch.distributed's process group): the answer is then for the rank as it is
        now."""
        if self._host_opened:
            return self._host.dumping
        return self.off_reason == ""

    @property
    def off_reason(self):
        """Why nothing is dumped, or ''."""
        if not self._host_opened and self._config is not None:
            return self._config.off_reason(_rank())
        return self._off_reason

    @property
    def iteration(self):
        """The current iteration number (None before the first module call, or when nothing
        is dumped)."""
        return self._host.iteration if self._host is not None else None

    @property
    def summary(self):
        """What was written: root, files, bytes, kernels_dumped, statistic_rows,
        unused_kernel_entries, graphs, calls, optimizer_steps (after close(), or so far); None
        when nothing is dumped."""
        if self._summary is not None:
            return self._summary
        return self._host.summary() if self._dumping() else None

    @property
    def error(self):
        """The first write error ('' when none): dumping stopped there, the training did not."""
        return self._error

    # --- lifetime --------------------------------------------------------------------------

    def start(self):
        """Turns the dump on (``with`` calls it). One Dump may be on at a time."""
        if self._closed:
            raise RuntimeError("this Dump was closed; make a new one")
        if self._started:
            return self
        if _state.active is not None:
            raise RuntimeError("another graphdump Dump is on in this process; close it first")
        self._started = True
        _state.active = self
        _torch_patches.install(self._auto)
        atexit.register(self.close)
        if self._config is None:
            _log(f"dump: off ({self._off_reason})")
        return self

    def close(self, error=None):
        """Ends the open iteration, waits for every file, turns the dump off and returns the
        summary (None when nothing was dumped). Idempotent; also runs at interpreter exit.
        error: why the training stopped early (an exception), if it did: the dump is then marked
        incomplete, and .dump_metadata/INCOMPLETE says why."""
        if self._closed:
            return self._summary
        self._closed = True
        if os.getpid() != self._pid:
            # A forked child: the dump is the parent's, which closes it; the child dumped nothing.
            return None
        if _state.active is self:
            _state.active = None
            _torch_patches.uninstall()
        atexit.unregister(self.close)
        if (self._auto and self.off_reason == "" and not self._open_failed and
                (self._host is None or self._host.calls == 0)):
            _log("warning: the script called no torch.nn.Module, so no kernel was dumped "
                 "(docs/python.md)")
        if not self._dumping():
            return None
        self._flush_allreduce()
        if error is not None:
            if self._kernel_failure is not None and self._kernel_failure[0] == str(error):
                error = f"{error} ({self._kernel_failure[1]})"
            self._host.run_failed(str(error))
        self._error = self._host.close()
        self._summary = self._host.summary()
        if self._error:
            _log(f"dump incomplete: {self._error}")
        return self._summary

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, traceback):
        failed = exc_type is not None and not (issubclass(exc_type, SystemExit) and
                                               exc.code in (0, None))
        self.close(error=_describe_exception(exc_type, exc) if failed else None)
        return False

    # --- what is dumped --------------------------------------------------------------------

    def wrap(self, module):
        """Dumps `module`'s calls from now on and returns it: a plain torch.nn.Module through
        the eager capture (it runs as it is), a TorchScript module through graphdump's executor.
        Its graph id is the number of modules wrapped before. TypeError for a
        DistributedDataParallel (wrap the module inside it) or anything else."""
        if not isinstance(module, torch.nn.Module) or isinstance(module, _TRANSPARENT):
            raise _not_a_module(module, "Dump.wrap")
        if module not in self._wrapped_set:
            self._wrapped.append(module)
            self._wrapped_set.add(module)
            if self._host is not None:
                self._register(module, strict=True)
        return module

    def track(self, obj):
        """Tracks a torch.optim optimizer (each step() dumps its update kernels and ends the
        iteration) or a DistributedDataParallel model (its gradient all-reduce is dumped).
        Returns obj."""
        if isinstance(obj, torch.optim.Optimizer):
            _torch_optimizer.track(self, obj)
        elif isinstance(obj, torch.nn.parallel.DistributedDataParallel):
            _torch_ddp.hook_ddp(obj)
        else:
            raise TypeError(f"Dump.track: expected a torch.optim.Optimizer or a "
                            f"DistributedDataParallel, got {type(obj).__name__}")
        return obj

    def set_dump(self, module):
        """Marks a module (a dumped one or one of its submodules, plain or TorchScript) and
        everything under it for dump_mode 2, as MindSpore's set_dump(cell). Its backward and
        optimizer kernels follow its module path."""
        if not isinstance(module, torch.nn.Module) or isinstance(module, _TRANSPARENT):
            raise _not_a_module(module, "Dump.set_dump")
        if self._config is not None and self._config.dump_mode != 2:
            _log(f"warning: set_dump has no effect: dump_mode is {self._config.dump_mode} (it "
                 "selects kernels only with dump_mode 2)")
        self._compiled_set_dump.append(module)
        self._apply_compiled_set_dump()
        if self._host is None or not self._apply_set_dump(module):
            self._pending_set_dump.append(module)

    # --- internals -------------------------------------------------------------------------

    def _apply_compiled_set_dump(self):
        """Marks the compiled kernels under set_dump's modules, by each module's path in the
        compiled module that holds it (a compiled kernel's module path is relative to the
        module that was compiled; docs/compile.md). Called by set_dump, and by the compiled
        front end before it adds a graph."""
        if self._host is None or not self._compiled_set_dump:
            return
        roots = set(_state.compiled_roots)
        frames = sys.modules.get("torch._dynamo.eval_frame")
        optimized = frames.OptimizedModule if frames is not None else ()
        for root in list(self._wrapped_set) + self._eager_roots:
            for _, m in root.named_modules():
                if isinstance(m, optimized):
                    roots.add(m._orig_mod)
                elif getattr(m, "_compiled_call_impl", None) is not None:  # Module.compile()
                    roots.add(m)
        for module in self._compiled_set_dump:
            for root in roots:
                path = next((p for p, m in root.named_modules() if m is module), None)
                if path is not None:
                    self._host.set_compiled_dump(path)

    def _dumping(self):
        return self._host is not None and self._host.dumping

    def _apply_set_dump(self, module):
        if isinstance(module, torch.jit.ScriptModule):
            return self._host.set_dump(module)
        return self._host.set_eager_dump(module)

    def _eager_host(self):
        """The host when plain modules are dumped in this process now, else None."""
        if (self._closed or os.getpid() != self._pid or threading.get_ident() != self._thread
                or torch._C._get_tracing_state()):
            return None
        if not self._host_opened:
            self._open_host()
        return self._eager

    def _takes_root(self, module):
        """Is a plain module called from outside any module one this Dump dumps?"""
        return self._auto or module in self._wrapped_set

    def _add_eager(self, module):
        """Registers a plain module's graph (its tree, parameters and buffers)."""
        self._host.add_eager_graph([(m, path) for path, m in module.named_modules()],
                                   list(module.named_parameters()), list(module.named_buffers()))
        self._eager_roots.append(module)
        self._registered.add(module)
        for p in module.parameters():
            self._routed_parameters.add(id(p))
        if self._pending_set_dump:
            self._pending_set_dump = [m for m in self._pending_set_dump
                                      if not self._apply_set_dump(m)]

    def _routes(self, module):
        return (not self._closed and os.getpid() == self._pid and
                threading.get_ident() == self._thread and
                module not in self._unroutable and
                (self._auto or module in self._wrapped_set) and
                not torch._C._get_tracing_state())

    def _open_host(self):
        """The host, opened at the first use. When nothing is dumped here it only runs modules
        through the executor, so that a training computes the same whatever it dumps."""
        if self._host_opened:
            return self._host
        self._host_opened = True
        rank = _rank()
        if self._config is not None:
            self._off_reason = self._config.off_reason(rank)
            if self._off_reason:
                _log(f"dump: off ({self._off_reason})")
        if self._off_reason:
            self._host = _C.Host.executor_only()
        else:
            hint = ("remove it, dump elsewhere (the configuration's path), or replace it with "
                    + ("graphdump python --overwrite" if self._auto else "Dump(overwrite=True)"))
            try:
                self._host, warning = _C.Host.open(self._config, rank, self._name,
                                                   self._overwrite, hint)
            except ConfigError:
                self._open_failed = True
                raise
            if warning:
                # The dump path cannot be prepared: the dump stops, never the training.
                self._off_reason = warning
                _log(f"warning: {warning}")
        if self._precision is not None:
            self._precision.start(self._host)
        casts = self._precision is not None and self._precision.precision != "fp32"
        self._eager = self._host if self._host.dumping or casts else None
        if len(self._optimizers):
            self._host.track_optimizers()
        for module in self._wrapped:
            self._register(module, strict=True)
        return self._host

    def _register(self, module, strict):
        """Compiles and registers `module`. With strict, errors propagate (wrap); otherwise a
        module the executor cannot run is left to TorchScript, with a warning. A plain module
        gets an eager graph."""
        if module in self._registered:
            return True
        if not isinstance(module, torch.jit.ScriptModule):
            if self._eager is not None:
                self._add_eager(module)
            return True
        graphs = self._host.graphs
        try:
            self._host.register(module)
        except (ValueError, RuntimeError) as e:
            if strict:
                raise
            self._unroutable.add(module)
            _log(f"warning: {module.original_name} runs as plain TorchScript and is not dumped: "
                 f"{e}")
            return False
        self._registered.add(module)
        if self._host.graphs != graphs:
            for p in module.parameters():
                self._routed_parameters.add(id(p))
            if self._pending_set_dump:
                self._pending_set_dump = [m for m in self._pending_set_dump
                                          if not self._host.set_dump(m)]
        return True

    def _call(self, module, args, kwargs):
        host = self._open_host()
        if not self._register(module, strict=False):
            return _NOT_RUN
        for hook in getattr(module, "_forward_pre_hooks", {}).values():
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        out = host.call(module, args, kwargs)
        for hook in getattr(module, "_forward_hooks", {}).values():
            result = hook(module, args, out)
            if result is not None:
                out = result
        return out

    def _note_kernel_failure(self, exc, failure):
        """A failing kernel (`failure`, its log line) raised `exc` out of a module call. Only
        the description is kept: the exception and its frames are the script's."""
        self._kernel_failure = (_describe_exception(type(exc), exc), failure)

    def _flush_allreduce(self):
        pending, self._pending_allreduce = self._pending_allreduce, []
        for token, params in pending:
            self._host.end_allreduce(token, [p.grad for p in params])
