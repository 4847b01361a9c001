"""The answer of ``graphdump hunt`` (docs/hunt.md), from watch's hits and the tensor dump of the
hit iteration: did the first bad kernel create the non-finite values from finite inputs or
receive them (then the chain back to the one that created them), and what its inputs hold,
row by row."""
import csv
import glob
import os
import re
import sys
import sysconfig

import numpy

_TENSOR_NAME = re.compile(r"\.(input|output)\.(\d+)\.[^.]*(\.[^.]*)?\.npy$")
_MAX_CHAIN = 64
_MAX_ROWS_LISTED = 16


# In-place operators that overwrite their first input without reading it: that input, dumped as
# it was before the write (docs/python.md), is whatever the memory held (torch.empty, a reused
# gradient bucket) and may hold NaN that nothing computed.
OVERWRITING = ("copy_", "fill_", "zero_")


def overwritten_input(io, slot, op_type):
    """Is this tensor the old contents of memory an operator overwrites unread?"""
    return io == "input" and int(slot) == 0 and op_type in OVERWRITING


def _installed_roots():
    """Where this Python's standard library and installed packages lie (with a venv's base
    installation's), as path prefixes ending in '/'."""
    roots = set()
    for scheme_vars in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars or None)
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            if paths.get(key):
                roots.add(os.path.join(os.path.realpath(paths[key]), ""))
    return tuple(sorted(roots))


def library_file(file):
    """Is `file` (a source trace's frame) library code rather than the user's own: an installed
    package (site-packages, dist-packages), Python's standard library, a frozen module, or
    TorchScript's generated code?"""
    if not file or file.startswith("<") or file.startswith("code/__torch__"):
        return True
    if "/site-packages/" in file or "/dist-packages/" in file:
        return True
    return os.path.realpath(file).startswith(_installed_roots())


def caller_frame(trace):
    """The user's own line that called into the library where a kernel ran: the innermost
    frame of `trace` (a source trace, innermost first: {file, line, code}) outside library code
    (library_file), when the innermost frames are the library's (a transformers model's
    forward); None when the kernel's own line is the user's, or no frame of the trace is."""
    if not trace or not library_file(trace[0].get("file", "")):
        return None
    return next((f for f in trace if not library_file(f.get("file", ""))), None)


def computed_hits(watch):
    """`watch` (watch --json) without hits on memory an operator overwrites unread, with
    first_hit_per_rank recomputed (each rank's first remaining hit, in the hits' order)."""
    hits = [h for h in watch.get("hits", [])
            if not overwritten_input(h["io"], h["slot"],
                                     kernel_without_id(h["kernel"].rsplit("/", 1)[-1]))]
    firsts, seen = [], set()
    for h in hits:
        if h["rank"] not in seen:
            seen.add(h["rank"])
            firsts.append(h)
    return dict(watch, hits=hits, first_hit_per_rank=firsts)


def kernel_without_id(kernel):
    """A kernel's full name without its -op{N} suffix: N counts kernels in the order first
    seen, which differs between a run dumped from its first iteration and one dumped from a
    later one (docs/hunt.md)."""
    return re.sub(r"-op\d+$", "", kernel)


def tensor_key(hit):
    """Where a hit lies: (rank, graph, iteration, kernel, call, io, slot)."""
    return (hit["rank"], hit["graph_id"], hit["iteration"], hit["kernel"], hit["call"],
            hit["io"], hit["slot"])


def count_text(hit):
    """The counting part of a hit's detail ('8 NaN of 48 elements'), without positions."""
    return hit["detail"].split(";")[0].strip()


class TensorDump:
    """The tensor dump's kernel calls (from ``graphdump ls --json --kernels``): each call's
    files by (io, slot), and which output a file is a hard link of (docs/file-format.md: a
    kernel's output read again as a later kernel's input is the same file)."""

    def __init__(self, listing):
        self.calls = {}  # (rank, graph, iteration, kernel, call) -> {(io, slot): path}
        self.timestamps = {}
        self.outputs_by_inode = {}  # (rank, iteration, device, inode) -> [(call key, slot)]
        for rank in listing.get("ranks", []):
            for graph in rank.get("graphs", []):
                for it in graph.get("iterations", []):
                    for k in it.get("kernel_list", []):
                        key = (rank["rank"], graph["graph_id"], it["iteration"],
                               k["full_name"], k["call"])
                        files = {}
                        for path in k.get("files", []):
                            m = _TENSOR_NAME.search(os.path.basename(path))
                            if m:
                                files[(m.group(1), int(m.group(2)))] = path
                        self.calls[key] = files
                        self.timestamps[key] = k.get("timestamp") or 0
                        for (io, slot), path in files.items():
                            if io != "output":
                                continue
                            st = os.stat(path)
                            self.outputs_by_inode.setdefault(
                                (key[0], key[2], st.st_dev, st.st_ino), []).append((key, slot))

    def producer(self, key, slot):
        """The (call key, output slot) whose output input `slot` of call `key` is, or None."""
        path = self.calls.get(key, {}).get(("input", slot))
        if path is None:
            return None
        st = os.stat(path)
        for other, out_slot in self.outputs_by_inode.get((key[0], key[2], st.st_dev,
                                                          st.st_ino), []):
            if other != key and self.timestamps[other] <= self.timestamps[key]:
                return other, out_slot
        return None


def _load(path):
    try:
        return numpy.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None


def _nonfinite(array):
    if array is None or array.dtype.kind not in "fc":
        return 0
    return int(array.size - numpy.count_nonzero(numpy.isfinite(array)))


def _number(x):
    x = float(x)
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


def tensor_facts(path, row=None):
    """What a tensor file holds: dtype, shape, min and max of its finite elements, NaN, +Inf,
    -Inf and zero counts, the rows (first index) whose elements are all zero, and the facts of
    row `row` (the output's first bad row; row 0 when this tensor is broadcast along it)."""
    a = _load(path)
    if a is None:
        return {"file": path, "error": "not readable"}
    facts = {"file": path, "dtype": str(a.dtype), "shape": list(a.shape)}
    values = a.astype(numpy.float64) if a.dtype.kind in "biuf" else None
    if values is None:
        return facts
    finite = values[numpy.isfinite(values)]
    facts["min"] = _number(finite.min()) if finite.size else None
    facts["max"] = _number(finite.max()) if finite.size else None
    facts["nan"] = int(numpy.isnan(values).sum())
    facts["pos_inf"] = int(numpy.isposinf(values).sum())
    facts["neg_inf"] = int(numpy.isneginf(values).sum())
    facts["zeros"] = int((values == 0).sum())
    facts["elements"] = int(values.size)
    if values.ndim >= 1 and values.shape[0] > 0:
        rows = values.reshape(values.shape[0], -1)
        zero_rows = numpy.flatnonzero((rows == 0).all(axis=1))
        facts["rows"] = int(rows.shape[0])
        facts["all_zero_rows"] = [int(r) for r in zero_rows[:_MAX_ROWS_LISTED]]
        facts["all_zero_row_count"] = int(zero_rows.size)
        if row is not None:
            r = row if row < rows.shape[0] else (0 if rows.shape[0] == 1 else None)
            if r is not None:
                cells = rows[r]
                ok = cells[numpy.isfinite(cells)]
                facts["row"] = {"index": int(r), "elements": int(cells.size),
                                "all_zero": bool((cells == 0).all()),
                                "zeros": int((cells == 0).sum()),
                                "nonfinite": int(cells.size - ok.size),
                                "min": _number(ok.min()) if ok.size else None,
                                "max": _number(ok.max()) if ok.size else None}
    return facts


def _intended(watch):
    """(rank, graph, iteration, kernel, call, io, slot) of tensors holding only intended
    infinities."""
    return {tensor_key(h) for h in watch.get("intended_infinities", [])}


def _input_slots(files):
    return sorted(slot for io, slot in files if io == "input")


def _is_allreduce(kernel):
    return "AllReduce" in kernel


def explain(watch, listing, first=None, dump=None):
    """The chain from the first hit back to the kernel that created the non-finite values, and
    that kernel's inputs. `watch` is ``graphdump watch --json`` of the tensor dump, `listing`
    its ``graphdump ls --json --kernels``; `first` the hit to start from (default watch's first
    hit) and `dump` a TensorDump of `listing` already made. Returns a dict: origin ('created' or
    'received'),
    origin_detail (a sentence), chain (steps from the first hit back), creator (kernel, rank,
    iteration, call, source_line, inputs: tensor_facts of each) or None."""
    hits = watch.get("hits", [])
    dump = dump or TensorDump(listing)
    intended = _intended(watch)
    first = first or hits[0]
    row = first.get("row")
    by_call = {}
    for h in hits:
        by_call.setdefault(tensor_key(h)[:5], h)
    key, io, slot = tensor_key(first)[:5], first["io"], first["slot"]
    chain = []
    origin, detail, creator_key = "received", "", None
    for _ in range(_MAX_CHAIN):
        files = dump.calls.get(key, {})
        kernel = key[3]
        if io == "output":
            bad = [s for s in _input_slots(files)
                   if _nonfinite(_load(files[("input", s)])) > 0]
            unintended = [s for s in bad if key + ("input", s) not in intended]
            step = {"rank": key[0], "iteration": key[2], "kernel": kernel, "call": key[4],
                    "io": io, "slot": slot,
                    "source_line": by_call.get(key, {}).get("source_line", "")}
            if _is_allreduce(kernel) and not bad and ("input", 0) in files:
                step["how"] = "received from another rank through the all-reduce"
                chain.append(step)
                origin, detail = "received", (f"{kernel} (rank {key[0]}) received the values "
                                              "from another rank through the all-reduce")
                break
            if not unintended:
                step["how"] = ("created from finite inputs" if not bad else
                               "created from inputs whose only infinities were written on "
                               "purpose (a mask)")
                chain.append(step)
                origin, creator_key = "created", key
                detail = (f"{kernel} created them: its inputs are finite, its output {slot} "
                          "is not" if not bad else
                          f"{kernel} created them from inputs whose only infinities an operator "
                          "wrote on purpose (a mask such as masked_fill(-inf)): a row that is "
                          "all -inf, for example")
                break
            step["how"] = f"received through input {unintended[0]}"
            chain.append(step)
            io, slot = "input", unintended[0]
            continue
        # An input: the kernel call whose output it is.
        found = dump.producer(key, slot)
        if found is None:
            chain.append({"rank": key[0], "iteration": key[2], "kernel": kernel,
                          "call": key[4], "io": "input", "slot": slot,
                          "source_line": by_call.get(key, {}).get("source_line", ""),
                          "how": "received from outside the dumped kernels"})
            detail = (f"{kernel} received them through input {slot}, which no dumped kernel "
                      "of this iteration wrote: an input of the graph (the batch your script "
                      "fed in), a parameter, or a tensor made outside any module")
            break
        key, io, slot = found[0], "output", found[1]
    creator = None
    if creator_key is not None:
        files = dump.calls.get(creator_key, {})
        creator = {"rank": creator_key[0], "graph_id": creator_key[1],
                   "iteration": creator_key[2], "kernel": creator_key[3],
                   "call": creator_key[4],
                   "source_line": by_call.get(creator_key, {}).get("source_line", ""),
                   "inputs": [dict(slot=s, **tensor_facts(files[("input", s)], row))
                              for s in _input_slots(files)]}
    return {"origin": origin, "origin_detail": detail, "chain": chain, "creator": creator}


def _allreduce_received(watch, dump, rank, iteration):
    """The first AllReduce kernel of `rank` in `iteration` whose output is a hit and whose
    input (the rank's own gradient) is finite, or None."""
    for h in watch.get("hits", []):
        if (h["rank"] != rank or h["iteration"] != iteration or h["io"] != "output" or
                not _is_allreduce(h["kernel"])):
            continue
        files = dump.calls.get(tensor_key(h)[:5], {})
        if ("input", 0) in files and _nonfinite(_load(files[("input", 0)])) == 0:
            return h
    return None


def other_ranks(watch, listing, first):
    """How each other rank got its non-finite values: [{rank, kernel, iteration, io, slot,
    detail, source_line, how, through}]: `through` the AllReduce kernel whose finite input and
    non-finite output show the values came from another rank (None when none does), else `how`
    is that rank's own explanation (explain())."""
    dump = TensorDump(listing)
    out = []
    for h in watch.get("first_hit_per_rank", []):
        if h["rank"] == first["rank"]:
            continue
        # That rank's first hit from the hit iteration on.
        later = [x for x in watch["hits"]
                 if x["rank"] == h["rank"] and x["iteration"] >= first["iteration"]]
        h = later[0] if later else h
        via = _allreduce_received(watch, dump, h["rank"], h["iteration"])
        if via is not None:
            how = (f"received through the all-reduce: {via['kernel']} has a finite input (this "
                   "rank's gradient) and a non-finite output")
        else:
            how = explain(watch, listing, first=h, dump=dump)["origin_detail"]
        out.append({"rank": h["rank"], "kernel": h["kernel"], "iteration": h["iteration"],
                    "io": h["io"], "slot": h["slot"], "detail": h["detail"], "how": how,
                    "through": via["kernel"] if via is not None else None,
                    "source_line": h.get("source_line", "")})
    return out


def _statistic_rows(dump_root, hit):
    """The rows of statistic.csv of a hit's rank, graph and iteration in a dump."""
    pattern = os.path.join(glob.escape(dump_root), f"rank_{hit['rank']}", "*",
                           str(hit["graph_id"]), str(hit["iteration"]), "statistic.csv")
    rows = []
    for path in glob.glob(pattern):
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            rows += [{k: v for k, v in row.items() if k} for row in csv.DictReader(f)]
    return rows


def _same_named(rows, stripped):
    """The Op Names of `rows` whose name without -op{N} is `stripped`, in first-row order."""
    names = []
    for row in rows:
        name = row.get("Op Name", "")
        if kernel_without_id(name) == stripped and name not in names:
            names.append(name)
    return names


def statistic_row(dump_root, hit, named_in=None):
    """The statistic.csv row (a dict by column title) of a hit's tensor in a dump, or None.
    With `named_in` (the dump the hit comes from), the kernel is found by its name without
    -op{N}, at the same place among the kernels of that name."""
    file_name = re.sub(r"[/\\. ]", "_", hit["kernel"])
    rows = _statistic_rows(dump_root, hit)
    if named_in is not None:
        stripped = kernel_without_id(file_name)
        theirs = _same_named(_statistic_rows(named_in, hit), stripped)
        ours = _same_named(rows, stripped)
        place = theirs.index(file_name) if file_name in theirs else -1
        if place < 0 or place >= len(ours):
            return None
        file_name = ours[place]
    seen = 0
    for row in rows:
        if (row.get("Op Name") == file_name and row.get("IO") == hit["io"] and
                row.get("Slot") == str(hit["slot"])):
            if seen == hit["call"]:
                return row
            seen += 1
    return None
