"""graphdump.torch's DistributedDataParallel hook: a communication hook that all-reduces as DDP
does (or calls the user's own hook) and dumps the all-reduce as kernels. Not an API."""
import torch

from . import _torch_state as _state
from ._torch_state import dumping_host as _dumping_host

_ddp_init_original = torch.nn.parallel.DistributedDataParallel.__init__
_ddp_register_original = torch.nn.parallel.DistributedDataParallel.register_comm_hook


class _CommHookState:
    """Our DDP communication hook's state: the process group, and the user's own hook (if they
    register one) that it calls instead of the plain all-reduce."""

    def __init__(self, process_group):
        self.process_group = process_group
        self.inner = None  # (state, hook)


def ddp_init(ddp, *args, **kwargs):
    _ddp_init_original(ddp, *args, **kwargs)
    dump = _state.active
    if dump is not None and dump._routes(ddp.module):
        hook_ddp(ddp)


def hook_ddp(ddp):
    if getattr(ddp, "_graphdump_comm", None) is not None:
        return
    state = _CommHookState(ddp.process_group)
    _ddp_register_original(ddp, state, _dump_comm_hook)
    ddp._graphdump_comm = state


def ddp_register_comm_hook(ddp, state, hook):
    ours = getattr(ddp, "_graphdump_comm", None)
    if ours is None:
        return _ddp_register_original(ddp, state, hook)
    if ours.inner is not None:
        raise RuntimeError("register_comm_hook can only be called once")
    ours.inner = (state, hook)


def _allreduce_mean(process_group, bucket):
    """DDP's own reduction: each gradient times 1/world_size, then summed over ranks (without a
    hook DDP multiplies while copying into the bucket; with one it copies, so we multiply)."""
    tensor = bucket.buffer()
    tensor.mul_(1.0 / process_group.size())
    future = torch.distributed.all_reduce(tensor, group=process_group, async_op=True).get_future()
    return future.then(lambda f: f.value()[0])


def _dump_comm_hook(state, bucket):
    dump = _state.active
    host = _dumping_host(dump)
    if host is not None:
        params = bucket.parameters()
        token = host.begin_allreduce(params, bucket.gradients())
        # The reduced gradients are in the parameters' .grad once backward() returns: dumped then.
        dump._pending_allreduce.append((token, params))
    if state.inner is not None:
        return state.inner[1](state.inner[0], bucket)
    return _allreduce_mean(state.process_group, bucket)
