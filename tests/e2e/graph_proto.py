"""Reads and rewrites a dump's graph files (graphs/ms_output_trace_code_graph_{id}.pb) with the
project's own proto (proto/graphdump_graph.proto, compiled here with protoc), to craft hostile
dumps from real ones."""
import os
import sys

import gdtest as t

sys.path.insert(0, os.path.join(t.SOURCE_DIR, "tests", "python"))
import proto_module  # noqa: E402

_module = None


def module():
    global _module
    if _module is None:
        _module = proto_module.load("graphdump_graph")
    return _module


def path(rank_dir, graph_id=0):
    return os.path.join(rank_dir, "graphs", f"ms_output_trace_code_graph_{graph_id}.pb")


def read(rank_dir, graph_id=0):
    graph = module().GraphProto()
    with open(path(rank_dir, graph_id), "rb") as f:
        graph.ParseFromString(f.read())
    return graph


def write(rank_dir, graph, graph_id=0):
    with open(path(rank_dir, graph_id), "wb") as f:
        f.write(graph.SerializeToString())


def kernel(graph, op_type):
    """The one kernel of `graph` whose op type is `op_type`."""
    found = [k for k in graph.kernels if k.op_type == op_type]
    assert len(found) == 1, f"{op_type}: {[k.full_name for k in graph.kernels]}"
    return found[0]


def set_call(k, schema=None, **arguments):
    """Replaces the recorded schema (when given) and the named arguments' values."""
    if schema is not None:
        k.schema = schema
    for arg in k.arguments:
        if arg.name in arguments:
            arg.value = arguments.pop(arg.name)
    assert not arguments, f"{k.full_name} has no argument {list(arguments)}"
