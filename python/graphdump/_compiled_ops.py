"""torch.compile's operator mode (GRAPHDUMP_COMPILE_MODE=operators, docs/compile.md): the graphs
AOTAutograd makes of each compiled region (a forward, a backward) run operator by operator
through an interpreter instead of Inductor's generated code, every ATen operator a kernel
(_export_graph.Runner), at eager numerics. Not an API.
"""
import weakref

from . import _export_graph
from . import _torch_state as _state

ENV = "GRAPHDUMP_COMPILE_MODE"
_previous = None
_names = weakref.WeakKeyDictionary()  # Dump -> graphs registered so far (their count names them)


def install():
    """torch.compile's Inductor backend compiles to interpreted graphs from now on."""
    global _previous
    from torch._inductor import compile_fx as module
    if _previous is not None:
        return
    _previous = module.compile_fx

    def compile_fx(model_, example_inputs_, *args, **kwargs):
        from torch._dynamo.backends.common import aot_autograd
        return aot_autograd(fw_compiler=_compiler(False),
                            bw_compiler=_compiler(True))(model_, example_inputs_)

    module.compile_fx = compile_fx


def uninstall():
    global _previous
    if _previous is None:
        return
    from torch._inductor import compile_fx as module
    module.compile_fx = _previous
    _previous = None


def _compiler(backward):
    def compile(gm, example_inputs):
        from torch._functorch.aot_autograd import make_boxed_func
        return make_boxed_func(_Graph(gm, backward))
    return compile


class _Graph:
    """One AOTAutograd graph, run by the interpreter while a Dump dumps, else as it is."""

    def __init__(self, gm, backward):
        self._gm = gm
        self._backward = backward
        self._runners = weakref.WeakKeyDictionary()  # Dump -> its Runner

    def __call__(self, *args):
        dump = _state.active
        host = _state.dumping_host(dump)
        if host is None:
            return self._gm(*args)
        runner = self._runners.get(dump)
        if runner is None:
            count = _names.get(dump, 0)
            _names[dump] = count + 1
            name = f"{'backward' if self._backward else 'forward'}_{count}"
            runner = self._runners[dump] = _export_graph.Runner(self._gm, name, dump,
                                                               self._backward)
        pause = host.pause_eager()  # the graph's operators are its kernels, not eager ones
        try:
            return runner.run(list(args))
        finally:
            pause.close()
