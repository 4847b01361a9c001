"""graphdump.torch's shared state (torch.py, _torch_patches.py, _torch_ddp.py): which Dump is
on in this process, and the few facts about the process its parts ask for. Not an API."""
import os
import sys
import threading
import weakref

import torch

active = None  # the Dump that is on, if any
# The modules torch.compile was given while a Dump was on (a module, or the module of a bound
# method: Module.compile()), whose paths compiled kernels' module paths are relative to.
compiled_roots = weakref.WeakSet()
# Called as f(dump, iteration) after an optimizer step has ended `iteration` and its statistic
# rows are written (graphdump hunt's stopper, _hunt_child.py); None otherwise.
after_iteration = None
NOT_RUN = object()  # Dump._call: the module was left to TorchScript
# Containers whose forward only calls the module inside: that module is the graph.
TRANSPARENT = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)


def log(message):
    print(f"graphdump: {message}", file=sys.stderr, flush=True)


def rank():
    """This process's rank: torch.distributed's when a process group is initialised, else
    $RANK (torchrun sets it), else 0."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    text = os.environ.get("RANK", "")
    return int(text) if text.isdigit() else 0


def captures_thread(dump):
    """Is the calling thread one whose work `dump` captures: the thread that made it, or one
    running a node of a backward pass it hooked (autograd's device threads, a
    DistributedDataParallel communication hook, a reentrant backward)? Other threads' module
    calls, backward passes and optimizer steps run untouched (docs/reliability.md, "Threads")."""
    if threading.get_ident() == dump._thread:
        return True
    host = dump._host
    return host is not None and host.dumping and host.in_hooked_backward()


def naming_host(dump):
    """The host of `dump` when it names this thread's eager kernels (it dumps them, or a
    precision run casts them) in this process, else None."""
    if (dump is None or os.getpid() != dump._pid or threading.get_ident() != dump._thread
            or not dump._host_opened):
        return None
    return dump._eager


def dumping_host(dump):
    """The host of `dump` when it dumps in this process and captures this thread, else None."""
    if dump is None or os.getpid() != dump._pid or not dump._dumping():
        return None
    return dump._host if captures_thread(dump) else None

