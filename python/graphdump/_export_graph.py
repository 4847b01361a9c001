"""An exported program's graph as a graph of the dump (``graphdump run MODEL.pt2``, _exported.py;
docs/cli-run-train.md). Not an API.

Every call_function node whose target is an ATen operator and whose value holds a tensor is a
kernel, in graph order: named Default/<module path>/<operator>-op<N> from its nn_module_stack
(the scope of the innermost module, as TorchScript models' kernels are named), with the frames
of its stack_trace as its source, and its inputs named by the kernels (or graph inputs and
parameters) that produced them. The graph runs through a torch.fx.Interpreter whose run_node
hands each kernel's inputs (before it runs) and outputs (after) to the host.
"""
import torch
import torch.fx

from . import _compiled
from ._torch_state import dumping_host as _dumping_host


def _is_kernel(node):
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    return bool(_compiled._tensors([node.meta.get("val")])) or "val" not in node.meta


def _frames(stack_trace):
    """[(file, line, code)] of a stack trace, innermost first."""
    return [(f, int(line), code.strip())
            for f, line, code in reversed(_compiled._FRAME.findall(stack_trace or ""))]


def _spec(node, producers, backward=False):
    """(name without op id, op type, module path, source frames, input names, attributes);
    a backward graph's node (torch.compile's operator mode) is named under Gradients/ by its
    forward's module."""
    op = _compiled._op_name(node.target)
    stack = _compiled._module_stack(node, backward=backward)
    scope = "/".join(["Gradients/Default" if backward else "Default"] +
                     [f"{attr}-{cls}" for attr, _, cls in stack])
    module_path = stack[-1][1] if stack else ""
    inputs = [producers.get(a.name, a.name) for a in node.all_input_nodes]
    return (f"{scope}/{op}", op, module_path, _frames(node.meta.get("stack_trace")), inputs,
            {"aten": str(node.target)})


def _written(target, args, kwargs):
    """The tensors of a call, in order, and the positions among them of those it writes."""
    tensors, written = [], []
    schema = getattr(target, "_schema", None)
    arguments = schema.arguments if schema is not None else []
    values = list(args) + [kwargs[a.name] for a in arguments[len(args):] if a.name in kwargs]
    for i, value in enumerate(values):
        found = _compiled._tensors([value])
        mutable = (i < len(arguments) and arguments[i].alias_info is not None and
                   arguments[i].alias_info.is_write)
        if mutable:
            written.extend(range(len(tensors), len(tensors) + len(found)))
        tensors.extend(found)
    return tensors, written


class Runner:
    """Runs `module` (an ExportedProgram's module(), or an AOTAutograd graph) step by step,
    dumping through `dump`."""

    def __init__(self, module, name, dump, backward=False):
        self._module = module
        self._name = name
        self._dump = dump
        self._kernels = {}  # node -> index
        self._specs = []
        producers = {}
        for node in module.graph.nodes:
            if _is_kernel(node):
                index = len(self._specs)
                spec = _spec(node, producers, backward)
                self._specs.append(spec)
                self._kernels[node] = index
                producers[node.name] = f"{spec[0]}-op{index}"
        self._graph = None  # (host, graph id) once registered

    def run(self, inputs):
        """One step: the program's output for `inputs` (a list of tensors)."""
        host = _dumping_host(self._dump)
        if host is None:
            return self._module(*inputs)
        if self._graph is None or self._graph[0] is not host:
            self._graph = (host, host.add_compiled_graph(self._name, self._specs))
        gid = self._graph[1]
        host.begin_compiled_call(gid)
        try:
            # The interpreter flattens the inputs and builds the output as module() does
            # (the graph's pytree code generation).
            interpreter = _Interpreter(self._module, self._kernels, host, gid,
                                       host.step_dumps())
            return interpreter.run(*inputs)
        finally:
            host.end_compiled_call(gid)


class _Interpreter(torch.fx.Interpreter):
    def __init__(self, module, kernels, host, gid, dumps):
        super().__init__(module)
        self._kernels = kernels
        self._host = host
        self._gid = gid
        self._dumps = dumps

    def run_node(self, n):
        index = self._kernels.get(n)
        if index is None or not self._dumps:
            return super().run_node(n)
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            tensors, written = _written(n.target, args, kwargs)
            before = self._host.compiled_kernel_inputs(self._gid, index, tensors, written)
            result = getattr(self, n.op)(n.target, args, kwargs)
        if before is not None:
            self._host.compiled_kernel_done(self._gid, index, before, _compiled._tensors([result]))
        return result
