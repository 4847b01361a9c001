"""graphdump: dump a PyTorch training's kernels in MindSpore's Dump format, then find where its
numbers go wrong (docs/python.md).

Dumping (graphdump.torch):

    import graphdump.torch as gd
    with gd.Dump("data_dump.json") as dump:
        model = dump.wrap(torch.jit.script(net))
        dump.track(optimizer)
        ...

or, with no change to the script: ``graphdump python train.py ARGS``.

Analysis (this module), through the same C++ as the CLI:

    df = graphdump.load("dump/")                  # one row per dumped tensor (pandas)
    x = graphdump.read(df.iloc[0])                # a tensor as a NumPy array
    result = graphdump.compare("dump_bf16/", "dump_fp32/")
    hits = graphdump.watch("dump/", "nan,inf")
    answer = graphdump.hunt("train.py", ["--epochs", "1"])   # graphdump hunt (docs/hunt.md)
"""
import io
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import torch  # registers torch's types with pybind11 before the extension loads

from . import _graphdump
from ._graphdump import ConfigError

__version__ = _graphdump.__version__
__all__ = ["load", "read", "compare", "watch", "hunt", "Comparison", "ConfigError",
           "__version__"]


def _pandas():
    import pandas
    return pandas


def _path(path):
    """A path as the bytes of its name (str, bytes or PathLike; os.fsencode), so that any file
    name reaches the C++ side as it is."""
    return os.fsencode(os.fspath(path))


def _ids(name, value):
    """ranks= / iterations=: an int or an iterable of ints (None: all)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    try:
        ids = list(value)
    except TypeError:
        raise TypeError(f"load: {name}= takes an int or a list of ints, not "
                        f"{type(value).__name__}") from None
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool) or (name == "ranks" and i < 0):
            raise ValueError(f"load: {name}={value!r}: {i!r} is not a "
                             f"{'rank id' if name == 'ranks' else 'iteration'}")
    return ids


def load(path, *, ranks=None, iterations=None, kernels=None, io=None):
    """Indexes a dump directory (a dump root, a rank_{id} directory, a GE-layout dump or a
    `graphdump convert` output) and returns a pandas DataFrame with one row per dumped tensor.

    Filters, applied while the dump is read (what they leave out is never held, so loading one
    rank of a 512-rank dump costs what one rank costs):
      ranks: a rank id or a list of them (ValueError naming the ranks found for one not there);
      iterations: an iteration or a list of them (-1: constants/);
      kernels: a list of full names (exact), or a str: a regular expression (ECMAScript syntax,
        as C++'s std::regex) searched in each full name; ValueError for a bad one;
      io: 'input' or 'output' (ValueError for anything else).

    Columns: rank, graph, net_name, iteration (-1 for constants/), call (which call of the kernel
    in the iteration, from 0 in the order they ran: a module called twice in a step runs its
    kernels twice), timestamp (the tensor's, from its file name or statistic.csv row; <NA> when
    unknown; UInt64), order (the kernel's position in
    the execution order, -1 when unknown), kernel (full name), op_type, is_parameter, io
    ('input'/'output'), slot, dtype, shape (a tuple), file (the tensor file; '' for a
    statistic-only tensor), source (the kernel's source line 'file:line', '' when not
    recorded), first_index (where the first bad element lies: the index of the first NaN, or
    of the first infinity when there is no NaN, in the tensor's shape, e.g. (5, 3), as watch
    gives it), row (its first index, the batch row of a batch-first tensor; None below two
    dimensions), both None for an all-finite or statistic-only tensor, then one column per
    statistic.csv column found, in the file's order ('Max Value', 'NaN Count'...; NaN where a
    tensor has no row). When the dump has optimizer update kernels (Default/optimizer-...)
    with hyperparameters recorded (graphs/hyperparameters.jsonl), then: param_group (Int64,
    <NA> on other rows) and one column per hyperparameter recorded ('lr', 'betas', 'momentum',
    'weight_decay', 'eps', ... as the optimizer has them), each the value of the row's
    parameter group at the row's iteration (float64, NaN on other rows; 'betas' a tuple, None
    on other rows). Names (net_name, kernel, op_type, io, dtype, source) are categoricals
    (file: str objects); numbers are NumPy integer, bool and float columns; a statistic column
    is int64 when every row has an integer, float64 when every cell is a number, else objects
    (text alone, such as MD5, is pandas' str dtype from pandas 3).
    Files the index could not use are listed in ``df.attrs['skipped']`` as (path, reason) pairs.

    Names and fields hold bytes that are not UTF-8 replaced by U+FFFD, as the CLI's ``--json``;
    file paths (the 'file' column, skipped paths) are decoded as Python decodes file names
    (``os.fsdecode``), so ``read()`` and ``open()`` take them as they are.

    Raises FileNotFoundError for a missing directory and ValueError for one that holds no dump.
    """
    kernel_names = kernel_regex = None
    if isinstance(kernels, str):
        kernel_regex = kernels
    elif kernels is not None:
        kernel_names = [str(k) for k in kernels]
    if io is not None and not isinstance(io, str):
        raise ValueError(f"load: io={io!r} (allowed: 'input', 'output')")
    columns = _graphdump.index_columns(_path(path), _ids("ranks", ranks),
                                       _ids("iterations", iterations), kernel_names,
                                       kernel_regex, io)
    pd = _pandas()
    import numpy
    n = len(columns["rank"])
    skipped = columns["skipped"]

    def categorical(key):
        codes, categories = columns[key]
        return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))

    def objects(values):
        out = numpy.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            out[i] = v
        return out

    def shared(key):
        """Objects, each value one object shared by its rows (file paths may hold surrogate
        escapes, which pandas cannot hash into a categorical)."""
        codes, values = columns[key]
        return objects(values)[codes] if n else objects([])


    first_index = numpy.full(n, None, dtype=object)
    row = numpy.full(n, None, dtype=object)
    for at, index in columns["first_bad"]:
        first_index[at] = index
        row[at] = index[0] if len(index) >= 2 else None
    timestamp = columns["timestamp"]
    table = {
        "rank": columns["rank"],
        "graph": columns["graph"],
        "net_name": categorical("net_name"),
        "iteration": columns["iteration"],
        "call": columns["call"],
        "timestamp": pd.arrays.IntegerArray(timestamp, timestamp == 0),
        "order": columns["order"],
        "kernel": categorical("kernel"),
        "op_type": categorical("op_type"),
        "is_parameter": columns["is_parameter"],
        "io": pd.Categorical.from_codes(columns["io"], categories=["input", "output"]),
        "slot": columns["slot"],
        "dtype": categorical("dtype"),
        "shape": shared("shape"),
        "file": shared("file"),
        "source": categorical("source"),
        "first_index": first_index,
        "row": row,
    }
    for name, values in columns["statistics"]:
        table[name] = values if isinstance(values, numpy.ndarray) else objects(values)
    table.update(_hyperparameter_columns(table, columns["graph_files"], n, pd, objects))
    del columns, timestamp, first_index, row
    # copy=False: each column stays the array the index filled (pandas would otherwise copy
    # the columns of one dtype into one block).
    frame = pd.DataFrame(table, copy=False)
    del table
    frame.attrs["skipped"] = skipped
    frame.attrs["path"] = os.fspath(path)
    return frame


def _hyperparameter_columns(table, graph_files, n, pd, objects):
    """load()'s columns of the optimizer's update kernels (docs/python.md): param_group and each
    hyperparameter the dump records (lr, betas, ...), at each row's iteration, from the graphs'
    .ir files and the hyperparameters.jsonl beside them; none when the table has no update kernel
    with hyperparameters."""
    import numpy
    from .update_kernels import HYPERPARAMETERS, at_iteration, is_update_kernel, read_ir
    kernels = table["kernel"]
    if n == 0 or not any(is_update_kernel(k) for k in kernels.categories):
        return {}
    parsed = {}
    recorded = {(rank, graph): read_ir(path, parsed) for rank, graph, path in graph_files}
    if not any(recorded.values()):
        return {}
    group = numpy.zeros(n, dtype=numpy.int64)
    has_group = numpy.zeros(n, dtype=bool)
    values = {}
    names = kernels.categories
    codes = kernels.codes
    update_codes = [i for i, k in enumerate(names) if is_update_kernel(k)]
    for at in numpy.flatnonzero(numpy.isin(codes, update_codes)):
        entry = recorded.get((int(table["rank"][at]), int(table["graph"][at])), {}).get(
            names[codes[at]])
        if entry is None:
            continue
        param_group, runs = entry
        if param_group is not None:
            group[at], has_group[at] = param_group, True
        for key, value in (at_iteration(runs, int(table["iteration"][at])) or {}).items():
            values.setdefault(key, {})[at] = value
    columns = {"param_group": pd.arrays.IntegerArray(group, ~has_group)}
    for key in sorted(values, key=lambda k: (HYPERPARAMETERS.index(k)
                                             if k in HYPERPARAMETERS else len(HYPERPARAMETERS),
                                             k)):
        cells = values[key]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cells.values()):
            column = numpy.full(n, numpy.nan)
        else:
            column = objects([None] * n)
        for at, value in cells.items():
            column[at] = tuple(value) if isinstance(value, list) else value
        columns[key] = column
    return columns


def _one_row(tensor):
    """A row of load() in any form pandas gives one, as a mapping with 'file', 'io' and 'slot'."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(tensor, pd.DataFrame):
        if len(tensor) != 1:
            raise ValueError(f"read: a DataFrame of {len(tensor)} rows; pass one row "
                             "(df.iloc[i], a row of df.itertuples())")
        tensor = tensor.iloc[0]
    if (isinstance(tensor, tuple) and not hasattr(tensor, "_fields") and len(tensor) == 2
            and pd is not None and isinstance(tensor[1], pd.Series)):
        tensor = tensor[1]  # an iterrows() pair: (index, row)
    if hasattr(tensor, "_asdict"):
        tensor = tensor._asdict()  # an itertuples() row: a named tuple
    try:
        row = {key: tensor[key] for key in ("file", "io", "slot")}
    except (KeyError, TypeError, IndexError):
        raise ValueError(f"read: expected a row of load() (with 'file', 'io' and 'slot': "
                         f"df.iloc[i], a row of df.itertuples() or df.iterrows(), a dict) or a "
                         f"file's path; got {type(tensor).__name__}") from None
    try:
        row["kernel"] = tensor["kernel"]
    except (KeyError, TypeError, IndexError):
        pass
    return row


def read(tensor, *, as_torch=False):
    """Reads one dumped tensor as a NumPy array (or a torch tensor with ``as_torch=True``).

    `tensor` is a row of ``load()`` in any form pandas gives one (``df.iloc[i]``, ``df.loc[i]``,
    an ``itertuples()`` row, an ``iterrows()`` pair, a one-row DataFrame), a dict with its
    'file', 'io' and 'slot', or the path of a .npy file. Tensors inside Ascend dump files
    (file_format "bin", GE layout) are read out of them and converted to host layout. bfloat16
    tensors come back as float32, as .npy stores them (a raw bfloat16 file with descr '<E2' too,
    widened exactly).
    Raises ValueError naming the file when it is not a valid dump file, ValueError for a
    statistic-only row (it has no file), and ValueError for anything else that is not one row.
    """
    import numpy
    if isinstance(tensor, (str, os.PathLike)):
        path, io_name, slot = os.fspath(tensor), "output", 0
    else:
        row = _one_row(tensor)
        path, io_name, slot = row["file"], row["io"], int(row["slot"])
        if not path:
            raise ValueError(f"{row.get('kernel', '?')} {io_name} {slot}: a statistic-only tensor "
                             "has no file to read (saved_data was 'statistic')")
    ascend = not os.fsdecode(path).endswith(".npy")
    descr, shape, fortran, data = _graphdump.read_tensor(_path(path), ascend, io_name == "input",
                                                         slot)
    array = numpy.frombuffer(data, dtype=numpy.dtype(descr))
    array = array.reshape(shape, order="F" if fortran else "C").copy()
    return torch.from_numpy(array) if as_torch else array


@dataclass
class Comparison:
    """What ``compare`` returns.

    table: the ``compare --out`` table as a DataFrame, one row per tensor pair (columns in
      docs/analysis.md), with the attribution columns (standard, norm_rel_err, error, role,
      input_error, output_error, growth, added_error, adds_error, contribution_rank).
    first_divergence: what the CLI prints as the first divergence: the first kernel that adds
      error (docs/precision.md) or, when none does, the first kernel with verdict error, as a
      dict with 'kernel', 'rank', 'graph_id', 'iteration', 'order', 'op_type',
      'source_line', 'reason', 'source_trace' and the attribution fields ('input_error',
      'output_error', 'growth', 'added_error', 'adds_error', 'contribution_rank', 'role',
      'input_rounding', 'inputs_near_rounding', 'error_origin', 'discrete_divergence',
      'discrete_change': docs/precision.md, "Discrete outputs"); a kernel that adds error also
      has 'float32_chain': what to keep in float32, the kernel and the chain of kernels and
      rounded parameters producing its inputs ('keep_fp32', 'kernels', 'parameters',
      'upstream'; docs/precision.md, "Verdicts"). None when no kernel fails.
    contributors: the kernels that add error, discrete divergences first, then the largest
      added error, as dicts of the
      same form (``contributors[0]`` is the top contributor).
    summary: counts: 'kernels', 'pass', 'warning', 'error', 'unpaired', 'skipped'.
    unpaired: kernels found on one side only, as dicts with 'side' ('A' or 'B') and 'kernel'.
    differing_sources: parameters and constants whose values differ ('kernel', 'role',
      'iteration', 'error', 'reason'); differing_graph_inputs: kernel inputs no dumped kernel
      produced whose values differ ('kernel', 'slot', 'iteration', 'error', 'reason').
    Unpacks as ``table, first_divergence = compare(...)``.
    """
    table: Any
    first_divergence: Optional[Dict[str, Any]]
    summary: Dict[str, int] = field(default_factory=dict)
    unpaired: List[Dict[str, Any]] = field(default_factory=list)
    contributors: List[Dict[str, Any]] = field(default_factory=list)
    differing_sources: List[Dict[str, Any]] = field(default_factory=list)
    differing_graph_inputs: List[Dict[str, Any]] = field(default_factory=list)

    def __iter__(self):
        return iter((self.table, self.first_divergence))


def compare(a, b, *, iteration=None, atol=None, rtol=None):
    """Compares dump `a` (the run under test) with dump `b` (the reference) kernel by kernel, as
    ``graphdump compare A B`` does, and returns a Comparison.

    iteration: only this iteration (default: every iteration both have).
    atol, rtol: None (default): each tensor pair is judged by the standard of the lower
      precision of its dtypes (docs/precision.md); given (either): the elementwise check
      |a-b| <= atol + rtol*|b| for every pair (an unset one is 1e-8 / 1e-5), as the CLI's
      --atol/--rtol.
    """
    if iteration is not None and iteration < 0:
        raise ValueError(f"iteration must be 0 or more, got {iteration}")
    csv, text = _graphdump.compare(_path(a), _path(b), iteration,
                                   None if atol is None else float(atol),
                                   None if rtol is None else float(rtol))
    result = json.loads(text)
    table = _pandas().read_csv(io.StringIO(csv), keep_default_na=False,
                               na_values={c: [""] for c in _NUMERIC_COMPARE_COLUMNS})
    table["adds_error"] = table["adds_error"].astype(str).str.lower() == "true"
    first = result.get("first_adding_error") or result.get("first_failure")
    return Comparison(table=table, first_divergence=first,
                      summary=result.get("summary", {}), unpaired=result.get("unpaired", []),
                      contributors=result.get("contributors", []),
                      differing_sources=result.get("differing_sources", []),
                      differing_graph_inputs=result.get("differing_graph_inputs", []))


def replay(dump, kernel, *, reference=None, iteration=None, rank=None, call=None):
    """Re-executes one dumped kernel from its dumped inputs with LibTorch, as ``graphdump replay
    DUMP KERNEL [--reference REF]`` does, and returns its result as a dict (the keys of
    ``--json``, docs/precision.md): ``verdict`` ("accurate", "inaccurate", "ill-conditioned",
    "inherits" or "not replayable"), ``reason`` (the words), and the numbers ``own``,
    ``conditioning``, ``inherited`` (each ``{rel_l2, max_abs, cosine}``), ...; with a reference,
    an ill-conditioned kernel's ``float32_chain`` (as in ``compare``'s first_divergence) and an
    inheriting kernel's ``upstream`` (the kernel that added the error). The verdict follows the
    model compare and report share (docs/precision.md, "Verdicts").

    kernel: a full name, an op type or a piece of a full name naming one kernel.
    reference: the same model's dump in float32, for conditioning and inherited error.
    call: which call of the kernel in the iteration (a module called more than once; default 0).
    Raises ValueError (a name matching several kernels, an iteration or rank the dump lacks)
    or FileNotFoundError (no such dump or kernel), with the CLI's message. A kernel that cannot be replayed (random, arguments
    computed at run time, backward) is a result with verdict "not replayable" and the reason.
    """
    if iteration is not None and iteration < 0:
        raise ValueError(f"iteration must be 0 or more, got {iteration}")
    if rank is not None and rank < 0:
        raise ValueError(f"rank must be 0 or more, got {rank}")
    if call is not None and call < 0:
        raise ValueError(f"call must be 0 or more, got {call}")
    text = _graphdump.replay(_path(dump), kernel,
                             None if reference is None else _path(reference), iteration, rank,
                             call)
    return json.loads(text)


# compare --out columns whose empty cells mean "not computed".
_NUMERIC_COMPARE_COLUMNS = [
    "elements", "cosine", "max_abs_err", "max_rel_err", "rmse", "rel_err_below_0.1pct",
    "rel_err_below_0.5pct", "allclose_failures", "nan_a", "nan_b", "inf_a", "inf_b",
    "nonfinite_mismatches", "norm_rel_err", "error", "input_error", "output_error", "growth",
    "added_error"]


def watch(path, checks="nan,inf", *, count_intended_inf=False):
    """Checks every tensor of a dump against watchpoints, as ``graphdump watch DIR --check
    CHECKS`` does, and returns the hits as a DataFrame in the order they occurred, across ranks
    as the CLI lists them (row 0 is the dump's first hit; docs/analysis.md) (columns rank,
    graph_id, iteration, call, order, kernel, io, slot, check, detail, first_index, row,
    source_line, path; empty when nothing hit). first_index is the index of the first NaN (nan,
    grad-explode) or infinity (inf, overflow, large) in the tensor's shape, e.g. (5, 3), and row
    its first index (the batch row of a batch-first tensor; None below two dimensions); both None
    for other checks and statistic-only tensors. ``hits.attrs`` holds 'tensors_checked',
    'nothing_judged' (a sentence per check that had nothing to judge, saying what it needs: an
    empty frame is then no all-clear), 'skipped' and 'intended_infinities': the tensors whose infinities an operator writes on purpose
    (masked_fill, where, full, fill with a constant +-inf: an attention mask), which are not hits
    unless ``count_intended_inf=True``. NaN is always a hit.

    checks: comma-separated, as the CLI's --check ({checks}).
    """
    # The JSON is merged from each rank's hits spilled to a temporary file (docs/scale.md,
    # "Memory and speed at scale"); its text is dropped once parsed, before the frame is built.
    text = _graphdump.watch(_path(path), checks, bool(count_intended_inf))
    result = json.loads(text)
    del text
    columns = ["rank", "graph_id", "iteration", "call", "order", "kernel", "io", "slot", "check",
               "detail", "first_index", "row", "source_line", "path"]
    rows = [{c: h.get(c) for c in columns} for h in result.get("hits", [])]
    for row in rows:
        # The first bad element's index in the tensor's shape, a tuple like load()'s shapes.
        row["first_index"] = None if row["first_index"] is None else tuple(row["first_index"])
    frame = _pandas().DataFrame(rows, columns=columns)
    # Rows as ints, None where a hit has none (not a float column with NaN).
    frame["row"] = _pandas().Series([r["row"] for r in rows], dtype=object)
    frame.attrs["tensors_checked"] = result.get("tensors_checked")
    frame.attrs["nothing_judged"] = result.get("nothing_judged", [])
    frame.attrs["intended_infinities"] = result.get("intended_infinities", [])
    frame.attrs["skipped"] = result.get("skipped", [])
    return frame


# The checks listed from the table the CLI parses them with.
watch.__doc__ = watch.__doc__.replace("{checks}", _graphdump.watch_checks_allowed())


from .hunt import HuntError, HuntFailed, hunt  # noqa: E402  (graphdump hunt, docs/hunt.md)
