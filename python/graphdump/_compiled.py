"""graphdump.torch's compiled front end: the graphs torch.compile runs, dumped kernel by kernel as
Inductor generated them (docs/compile.md). Not an API.

How it hooks in, while a Dump is on and once the script calls torch.compile:
  - Inductor's CPU code generation gets a wrapper of graphdump's (register_backend_for_device):
    the same kernels, with the same fusion decisions, and around each kernel call of the
    generated Python code two lines that hand the kernel's buffers to the host (before: its
    inputs, copied first where it writes them in place; after: the buffers it wrote), and a
    try/finally around the call's kernels, so that a call that raises ends its step. The
    generated C++ kernels are not touched.
  - Each generated graph (a forward, a backward) is a graph of the dump, registered with the
    host at its first call; each of its kernels is described from Inductor's scheduler nodes and
    the FX nodes they came from: the ATen operators it fused, their module path
    (nn_module_stack; a backward node's forward's) and source lines (stack_trace).
  - With GRAPHDUMP_COMPILE_MODE=operators, none of that: AOTAutograd's graphs run operator by
    operator through an interpreter instead of Inductor's code (_compiled_ops.py).
  - Inductor's caches are off for the run (a cached graph would be the plain code), and while
    Dynamo or Inductor compiles, the eager capture sees nothing (compilation runs operators on
    fake tensors).
"""
import itertools
import re
import threading
import weakref

import torch

from . import _torch_state as _state
from ._torch_state import dumping_host as _dumping_host

_installed = None  # what _instrument() changed, to put back
_watching = False  # are _compile_started and _compile_ended registered with Dynamo
_keys = itertools.count()
_graphs = {}  # graph key -> _GraphSpec, for every graph generated in this process
_ids = weakref.WeakKeyDictionary()  # Dump -> {graph key: its host's graph id}
_lock = threading.Lock()
_Tensor = torch.Tensor


class _GraphSpec:
    def __init__(self, name):
        self.name = name
        self.kernels = []  # specs for DumpHost.add_compiled_graph


# --- install -----------------------------------------------------------------------------------

def install():
    """Instruments Inductor's CPU code generation for the Dump that is on, and pauses the eager
    capture while Dynamo or Inductor compiles (idempotent)."""
    _instrument()
    watch_compiles()


def watch_compiles():
    """Pauses the eager capture while Dynamo or Inductor compiles, and instruments Inductor's
    code at the first compilation (idempotent). Enough for a Dump that starts after the script
    called torch.compile: its compiled model is compiled at its first call, under the Dump."""
    global _watching
    if _watching:
        return
    from torch._dynamo.callback import callback_handler
    callback_handler.register_start_callback(_compile_started)
    callback_handler.register_end_callback(_compile_ended)
    _watching = True


def _instrument():
    global _installed
    if _installed is not None:
        return
    import os

    from . import _compiled_ops
    mode = os.environ.get(_compiled_ops.ENV, "kernels")
    if mode not in ("kernels", "operators"):
        _state.log(f"warning: {_compiled_ops.ENV}={mode!r} is neither 'kernels' nor "
                   "'operators': compiled graphs are dumped as Inductor's kernels "
                   "(docs/compile.md)")
    operators = mode == "operators"
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.codegen import common

    common.init_backend_registration()
    previous = common.device_codegens.get("cpu")
    if operators:
        _compiled_ops.install()
    else:
        wrapper_class, scheduling_factory = _codegen_classes()
        common.register_backend_for_device(
            "cpu", lambda scheduling: scheduling_factory(previous.scheduling, scheduling),
            wrapper_class, previous.cpp_wrapper_codegen, previous.fx_wrapper_codegen)
    caches = (inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache)
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    _installed = (previous, caches)


def uninstall():
    global _installed, _watching
    if _watching:
        from torch._dynamo.callback import callback_handler
        callback_handler.remove_start_callback(_compile_started)
        callback_handler.remove_end_callback(_compile_ended)
        _watching = False
    if _installed is None:
        return
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.codegen import common

    from . import _compiled_ops
    _compiled_ops.uninstall()
    previous, caches = _installed
    common.device_codegens["cpu"] = previous
    inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = caches
    _installed = None


_compile_pause = []


def _compile_started(args):
    dump = _state.active
    if dump is not None and dump.enabled:
        _instrument()  # a model compiled before the Dump started is compiled now
    host = _dumping_host(dump)
    _compile_pause.append(host.pause_eager() if host is not None else None)


def _compile_ended(args):
    if _compile_pause:
        pause = _compile_pause.pop()
        if pause is not None:
            pause.close()


# --- the generated code's calls ----------------------------------------------------------------

def begin(key):
    """A call of generated graph `key` starts; returns what before(), after() and end() need
    (the generated call keeps it in a local variable: a call of the same graph on another
    thread has its own), or None when the call dumps nothing."""
    dump = _state.active
    host = _dumping_host(dump)
    if host is None:
        return None
    with _lock:
        ids = _ids.setdefault(dump, {})
        gid = ids.get(key)
        if gid is None:
            dump._apply_compiled_set_dump()
            spec = _graphs[key]
            gid = host.add_compiled_graph(spec.name, spec.kernels)
            ids[key] = gid
    host.begin_compiled_call(gid)
    if not host.step_dumps():  # nothing of this call is dumped: its kernels run unobserved
        host.end_compiled_call(gid)
        return None
    return host, gid, host.pause_eager()


def end(call):
    if call is None:
        return
    host, gid, pause = call
    pause.close()
    host.end_compiled_call(gid)


def before(call, index, inputs, written, writes=()):
    """Kernel `index` of the graph of `call` (begin's, not None) is about to run: its inputs
    when it dumps, else None. `writes`: the buffers it writes that exist before it runs (a C++
    kernel's), whose statistics still queued are read first."""
    return call[0].compiled_kernel_inputs(call[1], index, _tensors(inputs), written,
                                          _tensors(writes))


def after(call, index, inputs, outputs):
    call[0].compiled_kernel_done(call[1], index, inputs, _tensors(outputs))


def unseen(call):
    """The call's code wrote a buffer between its kernels (a copy between devices)."""
    call[0].compiled_write_unseen(call[1])


def _tensors(values):
    """The tensors of `values`, nested tuples and lists flattened (a fallback kernel's output
    is a tuple), other values left out."""
    for v in values:
        if type(v) is not _Tensor:
            break
    else:
        return values  # most kernel calls: buffers only
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            out.extend(_tensors(v))
    return out


# --- code generation ---------------------------------------------------------------------------

def _codegen_classes():
    from torch._inductor import ir
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen, WrapperLine
    from torch._inductor.utils import aggregate_origins
    from torch._inductor.virtualized import V

    class Wrapper(PythonWrapperCodegen):
        """The Python wrapper with graphdump's two lines around each kernel call."""

        def __init__(self):
            self._gd_key = next(_keys)  # before the base class, which writes the prefix
            self._gd_spec = _GraphSpec(_graph_name(V.graph))
            self._gd_backward = bool(getattr(V.graph, "is_backward", False))
            self._gd_producers = {}  # buffer name -> full name of the kernel that wrote it
            self._gd_cpp = {}  # C++ kernel name -> (argument definitions, origins)
            _graphs[self._gd_key] = self._gd_spec
            super().__init__()
            self.imports.writeline("from graphdump import _compiled as _graphdump")

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:  # nested graphs (cond, while_loop) run as their parent's code
                return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper,
                                                   partition_signatures)
            return Wrapper()

        def generate_return(self, output_refs):
            super().generate_return(output_refs)
            if self._gd_spec.kernels:
                # The call's kernels and return run inside the try that the first kernel's
                # line opened: a call that raises (a kernel's bounds check) ends its step too.
                code = self.wrapper_call
                code.do_unindent()
                code.writeline("finally:")
                code.do_indent()
                code.writeline("_graphdump.end(_graphdump_call)")
                code.do_unindent()

        def _gd_kernel(self, origins, kind, reads, writes, written, outputs=None,
                       existing=False):
            """Adds a kernel reading buffers `reads` and writing `writes` (code expressions,
            names first; `outputs`: the FX nodes of each written buffer, for a kernel writing
            several; `existing`: the written buffers exist before the call, and PyTorch's
            dispatcher does not see the kernel write them) and emits the line before its call;
            returns the line after it."""
            index = len(self._gd_spec.kernels)
            if index == 0:  # the call's first kernel: the graph's call begins
                self.writeline(f"_graphdump_call = _graphdump.begin({self._gd_key})")
                self.writeline("try:")
                self.writeline(_Indent())
            spec = _kernel_spec(origins, kind, self._gd_backward,
                                [self._gd_producers.get(_name(r), _name(r)) for r in reads],
                                outputs)
            self._gd_spec.kernels.append(spec)
            for w in writes:
                self._gd_producers[_name(w)] = f"{spec[0]}-op{index}"
            # When the call dumps nothing, a kernel costs the check of _graphdump_call.
            pre = f", ({''.join(w + ', ' for w in writes)}))" if existing and writes else ")"
            self.writeline(f"_graphdump_in = _graphdump.before(_graphdump_call, {index}, "
                           f"({''.join(r + ', ' for r in reads)}), {tuple(written)!r}{pre} "
                           "if _graphdump_call is not None else None")
            return (f"if _graphdump_in is not None: _graphdump.after(_graphdump_call, {index}, "
                    f"_graphdump_in, ({''.join(w + ', ' for w in writes)}))")

        def codegen_device_copy(self, src, dst, non_blocking):
            super().codegen_device_copy(src, dst, non_blocking)
            if self._gd_spec.kernels:  # inside the call's try: a kernel's buffer may be `dst`
                self.writeline("if _graphdump_call is not None: _graphdump.unseen(_graphdump_call)")

        def generate_kernel_call(self, kernel_name, call_args, **kwargs):
            known = self._gd_cpp.get(kernel_name)
            if known is None or kwargs.get("triton", True) is not False:
                return super().generate_kernel_call(kernel_name, call_args, **kwargs)
            definitions, origins, pointer_origins = known
            reads, writes, written, outputs = [], [], [], []
            for definition, arg in zip(definitions, call_args):
                pointer = re.search(r"\b(in_out_ptr|in_ptr|out_ptr)\d+$", definition)
                if pointer is None or not isinstance(arg, str):
                    continue  # a size or a scalar
                if pointer.group(1) != "out_ptr":
                    if pointer.group(1) == "in_out_ptr":
                        written.append(len(reads))
                    reads.append(arg)
                if pointer.group(1) != "in_ptr":
                    writes.append(arg)
                    outputs.append(pointer_origins.get(pointer.group(0), []))
            # A buffer read through an in_ptr and written through an out_ptr of the same call
            # (a mutated graph input: a module's running statistic) is written in place too.
            written_names = {_name(w) for w in writes}
            written += [i for i, r in enumerate(reads)
                        if i not in written and _name(r) in written_names]
            line = self._gd_kernel(origins, kernel_name, reads, writes, written,
                                   outputs if len(outputs) > 1 else None, existing=True)
            super().generate_kernel_call(kernel_name, call_args, **kwargs)
            self.writeline(line)

        def _gd_extern(self, node, generate):
            reads = [i.codegen_reference() for i in node.inputs if isinstance(i, ir.IRNode)]
            line = self._gd_kernel(_extern_origins(node), node.get_kernel_name(), reads,
                                   [node.get_name()], [])
            generate(node)
            self.writeline(line)

        def generate_extern_kernel_out(self, node):
            self._gd_extern(node, super().generate_extern_kernel_out)

        def generate_extern_kernel_alloc(self, node):
            self._gd_extern(node, super().generate_extern_kernel_alloc)

        def generate_fallback_kernel(self, node):
            self._gd_extern(node, super().generate_fallback_kernel)

    def scheduling_factory(default, scheduler):
        made = default(scheduler)
        if type(made) is not CppScheduling:
            return made  # another CPU backend (config.cpu_backend): not instrumented
        return Scheduling(scheduler)

    class _Indent(WrapperLine):
        """Indents the lines after it (the body of the call's try)."""

        def codegen(self, code):
            code.do_indent()

    class Scheduling(CppScheduling):
        """C++ kernels as Inductor defines them, remembering each one's arguments and origins
        (the kernel's, and those of the buffer each output pointer holds last)."""

        def define_kernel(self, src_code, nodes, kernel_args=None):
            name = super().define_kernel(src_code, nodes, kernel_args)
            wrapper = V.graph.wrapper_code
            if isinstance(wrapper, Wrapper) and name not in wrapper._gd_cpp:
                args = self.kernel_group.args if kernel_args is None else kernel_args
                definitions = args.cpp_argdefs()[0]
                wrapper._gd_cpp[name] = (definitions, list(aggregate_origins(nodes)),
                                         _pointer_origins(args, nodes))
            return name

    return Wrapper, scheduling_factory


def _pointer_origins(args, nodes):
    """{'out_ptr0': FX nodes}: for each pointer a C++ kernel writes, the origins of the buffer
    it holds when the kernel ends (the last of the buffers written in place through it)."""
    out = {}
    for node in nodes:
        for buf in node.get_outputs() if hasattr(node, "get_outputs") else []:
            name = buf.get_name()
            pointer = args.output_buffers.get(name)
            if not isinstance(pointer, str):
                inplaced = args.inplace_buffers.get(name)
                pointer = getattr(inplaced, "inner_name", None)
            if isinstance(pointer, str):
                out[pointer] = list(getattr(buf.node, "origins", None) or [])
    return out


def _extern_origins(node):
    """The FX nodes an extern call stands for: those of its operator, else its origin node,
    else every origin (views folded into it included)."""
    overload = getattr(node, "op_overload", None)
    if overload is not None:
        own = [n for n in node.origins if n.target is overload]
        if own:
            return own
    origin = node.get_origin_node()
    return [origin] if origin is not None else list(node.origins)


def _graph_name(graph):
    import torch._guards

    context = torch._guards.TracingContext.try_get()
    names = getattr(context, "aot_graph_name", None) if context is not None else None
    name = "_".join(str(n) for n in names) if names else ""
    return name or ("backward" if getattr(graph, "is_backward", False) else "forward")


def _name(expr):
    """The buffer an argument expression names: 'buf3' of 'reinterpret_tensor(buf3, ...)'."""
    m = re.match(r"(?:reinterpret_tensor\()?\s*([A-Za-z_]\w*)", expr)
    return m.group(1) if m else expr


# --- what a kernel is called and where it comes from -------------------------------------------

# Operators that only view or regroup data: left out of a fused kernel's name when it computes.
_VIEWS = {"view", "reshape", "_reshape_alias", "_unsafe_view", "permute", "transpose", "t",
          "expand", "squeeze", "unsqueeze", "split", "split_with_sizes", "getitem", "select",
          "slice", "as_strided", "alias", "unbind", "clone", "contiguous"}
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n([^\n]*)')


def _kernel_spec(origins, kind, backward, input_names, outputs=None):
    """(name without op id, op type, module path, source trace, input names, attributes).
    `outputs`, for a kernel writing several buffers: each one's FX nodes, whose last computing
    operator is the value it holds (attribute output_ops, docs/compile.md)."""
    nodes = _ordered([n for n in origins if n is not None and n.op == "call_function"])
    ops = []
    for n in nodes:
        op = _op_name(n.target)
        if op not in ops:
            ops.append(op)
    computing = [op for op in ops if op not in _VIEWS]
    ops = computing or ops
    op_type = ops[0] if len(ops) == 1 else "FusionOp_" + "_".join(ops) if ops else "kernel"
    stacks = [_module_stack(n, backward) for n in nodes]
    common = _common_prefix(stacks) if stacks else []
    scope = "/".join(["Gradients/Default" if backward else "Default"] +
                     [f"{attr}-{cls}" for attr, _, cls in common])
    module_path = common[-1][1] if common else ""
    trace, seen = [], set()
    for n in reversed(nodes):  # the kernel's own line first: its last operator's
        loc = _user_frame(n.meta.get("stack_trace") or "")
        if loc is not None and loc[:2] not in seen:
            seen.add(loc[:2])
            trace.append(loc)
    fused = []
    for n in nodes:
        loc = _user_frame(n.meta.get("stack_trace") or "")
        where = f" ({loc[0].rsplit('/', 1)[-1]}:{loc[1]})" if loc else ""
        fused.append(f"{n.target}{where}")
    attributes = {"inductor_kernel": kind, "fused_ops": "; ".join(fused)}
    if outputs is not None:
        attributes["output_ops"] = "; ".join(_standing_for(o) for o in outputs)
    return (f"{scope}/{op_type}", op_type, module_path, trace, input_names, attributes)


_PASSIVE = _VIEWS | {"convert_element_type", "_to_copy", "copy", "detach"}


def _standing_for(origins):
    """'aten.sigmoid.default (train.py:12)': the last computing operator of a buffer's FX
    nodes (casts and views aside, as compare takes them), or '-' when none is known."""
    nodes = _ordered([n for n in origins if n is not None and n.op == "call_function"])
    computing = [n for n in nodes if _op_name(n.target) not in _PASSIVE] or nodes
    if not computing:
        return "-"
    loc = _user_frame(computing[-1].meta.get("stack_trace") or "")
    where = f" ({loc[0].rsplit('/', 1)[-1]}:{loc[1]})" if loc else ""
    return f"{computing[-1].target}{where}"


def _ordered(nodes):
    """FX nodes in their graph's order (topological)."""
    orders = {}

    def position(n):
        order = orders.get(id(n.graph))
        if order is None:
            order = orders[id(n.graph)] = {m: i for i, m in enumerate(n.graph.nodes)}
        return order.get(n, 0)
    return sorted(set(nodes), key=position)


def _op_name(target):
    name = getattr(target, "_opname", None) or getattr(target, "__name__", None) or str(target)
    return re.sub(r"\W", "_", name)


def _module_stack(node, backward):
    """[(attribute, module path, class name)] from the root's child to the innermost module."""
    stack = (node.meta.get("fwd_nn_module_stack") if backward else None) or \
        node.meta.get("nn_module_stack") or {}
    out = []
    for value in stack.values():
        path, cls = value[0], value[1]
        path = _module_path(path)
        if not path:
            continue
        name = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1].strip("'>")
        out.append((path.rsplit(".", 1)[-1], path, name))
    return out


def _module_path(dynamo_path):
    """'layers.0.attn' of Dynamo's "L['self'].layers[0].attn" (or its _modules['...'] form)."""
    path = re.sub(r"^L\['[^']*'\]\.?", "", dynamo_path)
    path = re.sub(r"_modules\['([^']*)'\]", r"\1", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\['([^']*)'\]", r".\1", path)
    return path.strip(".").replace("..", ".")


def _common_prefix(stacks):
    common = stacks[0]
    for s in stacks[1:]:
        n = 0
        while n < min(len(common), len(s)) and common[n] == s[n]:
            n += 1
        common = common[:n]
    return common


def _user_frame(stack_trace):
    """(file, line, code) of a stack trace's innermost frame, or None."""
    frames = _FRAME.findall(stack_trace)
    if not frames:
        return None
    file, line, code = frames[-1]
    return (file, int(line), code.strip())

