"""graphdump.torch's optimizer capture (docs/python.md): each step() of a tracked optimizer dumps
one update kernel per parameter, with its group's hyperparameters, and ends the iteration. Not an
API."""
import json
import math
import os
import types

import torch

from . import _torch_state as _state
from ._torch_state import dumping_host as _dumping_host
from ._torch_state import log as _log

# The hyperparameters an update kernel records of its parameter group at each step (those the
# group has; docs/file-format.md, "Update kernels").
_HYPERPARAMETERS = ("lr", "betas", "momentum", "dampening", "weight_decay", "eps", "alpha",
                    "nesterov", "amsgrad", "maximize")


def _hyperparameter(value):
    """A group's value as JSON holds it: numbers (a tensor lr as its float), bools, lists of
    numbers; None for anything else (left out)."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().reshape(-1)[0]) if value.numel() == 1 else None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (tuple, list)):
        items = [_hyperparameter(v) for v in value]
        return None if any(v is None for v in items) else items
    return None


def _group_hyperparameters(opt):
    """Each parameter's group index and its group's hyperparameters (a JSON object's text), in
    the order of the optimizer's parameters."""
    groups, texts = [], []
    for index, group in enumerate(opt.param_groups):
        values = {}
        for key in _HYPERPARAMETERS:
            if key in group:
                value = _hyperparameter(group[key])
                if value is not None:
                    values[key] = value
        text = json.dumps(values)
        groups.extend([index] * len(group["params"]))
        texts.extend([text] * len(group["params"]))
    return groups, texts


def _state_tensors(state):
    """The tensors of one parameter's optimizer state, in the state's key order."""
    if not state:
        return []
    return [v for v in state.values() if isinstance(v, torch.Tensor)]


def track(owner, optimizer):
    """Makes each step() of `optimizer` dump its update kernels and end the iteration, for the
    Dump `owner` (Dump.track, or graphdump python when the optimizer is made)."""
    if optimizer in owner._optimizers:
        return
    owner._optimizers.add(optimizer)
    if owner._host is not None:
        owner._host.track_optimizers()
    original = optimizer.step  # bound method, or an LR scheduler's counting wrapper

    def step(opt, *args, **kwargs):
        dump = _state.active
        if dump is not None and not _state.captures_thread(dump):
            dump._foreign.add(opt)
            return original(*args, **kwargs)  # another thread's training: untouched
        if dump is not None and os.getpid() == dump._pid and not dump._closed:
            dump._open_host()  # a step before any module call: the rank is known now
        host = _dumping_host(dump)
        run = dump._precision if dump is not None else None
        if host is None and run is not None and dump._host is not None:
            # A precision run: the update is not a kernel (a closure's forward is).
            args, kwargs, pause = run.closure(dump._host, args, kwargs)
            try:
                out = original(*args, **kwargs)
            finally:
                pause[0].close()
            if torch._C._current_graph_task_id() != -1:
                dump._stepped_in_backward = True  # the step ends with the backward pass
            else:
                run.after_step()
            return out
        if host is None:
            return original(*args, **kwargs)
        params = [p for group in opt.param_groups for p in group["params"]]
        if not any(p.grad is not None for p in params):
            # It updates nothing (a frozen part's optimizer): no kernel, no iteration's end.
            return original(*args, **kwargs)
        if dump._auto and not dump._warned_unowned:
            _warn_unowned(dump, params)
        if id(opt) in dump._stepped:
            # A second step of this optimizer in the open iteration: the training step its
            # first step belonged to has ended (an optimizer expected to step did not).
            iteration = host.iteration
            host.end_open_iteration()
            dump._stepped.clear()
            if _state.after_iteration is not None:
                _state.after_iteration(dump, iteration)
        # An iteration that captures nothing has no update kernels (nothing is registered
        # or dumped): the parameters' states and hyperparameters are not gathered for it.
        captures = not host.iteration_open or host.step_dumps()
        if captures:
            before = [_state_tensors(opt.state.get(p)) for p in params]
            groups, hyper = _group_hyperparameters(opt)
            token = host.begin_optimizer_step(type(opt).__name__, params, before, groups,
                                              hyper, _number(dump, opt))
        else:
            token = host.begin_optimizer_step(type(opt).__name__, [], [])
        # The update's operators are the update kernels; in a precision run a closure's
        # forward runs as the script's (its casts are the run's).
        if run is not None:
            args, kwargs, pause = run.closure(host, args, kwargs)
        else:
            pause = [host.pause_eager()]
        try:
            out = original(*args, **kwargs)
        finally:
            pause[0].close()
        iteration = host.iteration
        # One iteration per training step, however many optimizers step in it: the
        # iteration ends at the last of them, or, for optimizers stepping inside a backward
        # pass (one per parameter, in post-accumulate-grad hooks), when the pass ends
        # (docs/python.md).
        dump._stepped.add(id(opt))
        dump._own.add(opt)
        in_backward = torch._C._current_graph_task_id() != -1
        dump._stepped_in_backward |= in_backward
        ends = not in_backward and not _pending(dump, opt)
        after = [_state_tensors(opt.state.get(p)) for p in params] if captures else []
        host.end_optimizer_step(token, after, ends)
        if run is not None and not in_backward:
            run.after_step()
        if ends:
            dump._stepped.clear()
            if _state.after_iteration is not None:
                _state.after_iteration(dump, iteration)
        return out

    # An LR scheduler created later wraps this bound method again (it needs __func__); one
    # created before marked its wrapper, and warns at its first step() when the mark is
    # gone ("optimizer.step() has been overridden after learning rate scheduler
    # initialization"; the mark was `_with_counter` before torch 2).
    if hasattr(original, "_wrapped_by_lr_sched"):
        step._wrapped_by_lr_sched = original._wrapped_by_lr_sched
    optimizer.step = types.MethodType(step, optimizer)


def end_backward_steps(dump):
    """A backward pass of the capturing thread ended: when optimizers stepped inside it,
    the training step, and its iteration, end here (_torch_patches.py)."""
    if not dump._stepped_in_backward:
        return
    dump._stepped_in_backward = False
    host = _dumping_host(dump)
    iteration = host.iteration if host is not None else None
    if host is not None:
        host.end_open_iteration()
        dump._stepped.clear()
    if dump._precision is not None:
        dump._precision.after_step()  # --steps counts training steps
    if host is not None and _state.after_iteration is not None:
        _state.after_iteration(dump, iteration)


def _pending(dump, stepped):
    """Is another optimizer `dump` tracks still to step in this training step: one of this
    thread's training (it stepped here, or it updates a module run here) that has not
    stepped in the open iteration and has a parameter with a gradient? Another thread's
    optimizer is never looked at: its gradients are written by that thread's backward
    pass while this one runs (docs/reliability.md, "Threads")."""
    for other in list(dump._optimizers):
        if other is stepped or id(other) in dump._stepped or other in dump._foreign:
            continue
        if other not in dump._own and not any(
                id(p) in dump._routed_parameters for group in other.param_groups
                for p in group["params"]):
            continue
        if any(p.grad is not None for group in other.param_groups
               for p in group["params"]):
            return True
    return False


def _number(dump, opt):
    """`opt`'s number in the dump's hyperparameters (0, 1, ... in the order of first steps)."""
    number = dump._optimizer_numbers.get(opt)
    if number is None:
        number = dump._optimizer_numbers[opt] = dump._optimizers_numbered
        dump._optimizers_numbered += 1
    return number


def _warn_unowned(dump, params):
    """Warns once when `params` hold updated parameters of no module the script called."""
    unowned = [p for p in params if id(p) not in dump._routed_parameters]
    if not any(p.grad is not None for p in unowned):
        return  # said at the first step that updates one
    dump._warned_unowned = True
    updated = sum(p.grad is not None for p in unowned)
    # Updates of such parameters go into the graph of the first module that ran: with none,
    # nothing of them is written.
    written = ("so their update kernels are named unnamed_N" if dump._host.graphs > 0 else
               "and no module has run, so nothing of them is written")
    _log(f"warning: {updated} of the optimizer's {len(params)} parameters belong to no "
         f"module that was called, {written} (docs/python.md)")
