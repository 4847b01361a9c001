"""The optimizer's update kernels as a dump records them (docs/python.md, "Optimizer update
kernels"): each `Default/optimizer-{Class}/...` kernel's optimizer and parameter group (its `.ir`
entry's attributes `optimizer` and `param_group`) and its group's hyperparameters by iteration
(graphs/hyperparameters.jsonl beside the `.ir`). Used by load() (its hyperparameter columns) and
by graphdump hunt (the blown-up step's lr); imports neither torch nor pandas."""
import bisect
import json
import os
import re

# The hyperparameters load() gives columns to, in this order (those the dump records).
HYPERPARAMETERS = ("lr", "betas", "momentum", "dampening", "weight_decay", "eps", "alpha",
                   "nesterov", "amsgrad", "maximize")
# The attributes of an update kernel's node line: {optimizer: K, param_group: G}. Dumps of
# graphdump before 2026-12 kept the runs in the .ir itself: {hyperparameters: [...], ...}.
_GROUP = re.compile(r"[{ ]param_group: (-?\d+)[,}]")
_OPTIMIZER = re.compile(r"[{ ]optimizer: (-?\d+)[,}]")
_FULLNAME = "# Fullname with scope: ("
_RUNS = "{hyperparameters: "
# The keys of a line of hyperparameters.jsonl that are not hyperparameters.
_LINE_KEYS = ("iteration", "optimizer", "param_group")


def is_update_kernel(full_name):
    """Is `full_name` an optimizer's update kernel (Default/optimizer-{Class}/...)?"""
    return full_name.startswith("Default/optimizer-")


def _node_attributes(line):
    """(param_group, optimizer or runs) of an update kernel's node line, or None."""
    group = _GROUP.search(line)
    if group is None:
        return None
    group = int(group.group(1))
    at = line.find(_RUNS)
    if at >= 0:
        try:
            runs, _ = json.JSONDecoder().raw_decode(line, at + len(_RUNS))
        except ValueError:
            return None
        ok = isinstance(runs, list) and all(isinstance(r, dict) for r in runs)
        return (group, runs) if ok else None
    optimizer = _OPTIMIZER.search(line)
    return (group, int(optimizer.group(1))) if optimizer else None


def parse_ir(text, groups=None):
    """{full name: (param_group, runs)} of the update kernels an .ir text records; runs are
    [{"from": ITERATION, "lr": ..., ...}] in iteration order, those of the kernel's group in
    `groups` (parse_hyperparameters' result). Kernels without hyperparameters are left out."""
    found = {}
    pending = None  # the attributes of the last node line, until its Fullname line
    for line in text.splitlines():
        if line.endswith("}") and "param_group: " in line:
            pending = _node_attributes(line)
            continue
        at = line.find(_FULLNAME)
        if at < 0:
            continue
        if pending is not None:
            group, runs = pending
            if not isinstance(runs, list):
                runs = (groups or {}).get((runs, group))
            if runs:
                found[line[at + len(_FULLNAME):line.rfind(")")]] = (group, runs)
        pending = None
    return found


def parse_hyperparameters(text):
    """{(optimizer, param_group): runs} of a hyperparameters.jsonl text (one JSON object a line:
    iteration, optimizer, param_group and the group's values from that iteration on). Lines that
    are not such objects are skipped."""
    groups = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), int) and not isinstance(entry.get(k), bool)
                for k in _LINE_KEYS):
            continue
        run = {"from": entry["iteration"]}
        run.update((k, v) for k, v in entry.items() if k not in _LINE_KEYS)
        groups.setdefault((entry["optimizer"], entry["param_group"]), []).append(run)
    for runs in groups.values():
        runs.sort(key=lambda r: r["from"])
    return groups


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_ir(path, parsed=None):
    """parse_ir of the .ir file at `path`, with the hyperparameters.jsonl beside it; {} when the
    .ir cannot be read. `parsed` ({path: parse_hyperparameters' result}) keeps a rank's file
    read once for all of its graphs."""
    text = _read(path)
    if text is None:
        return {}
    log = os.path.join(os.path.dirname(path), "hyperparameters.jsonl")
    parsed = {} if parsed is None else parsed
    if log not in parsed:
        parsed[log] = parse_hyperparameters(_read(log) or "")
    return parse_ir(text, parsed[log])


def at_iteration(runs, iteration):
    """The hyperparameters of `runs` in force at `iteration` (the last run starting at or before
    it), without "from"; None when none had started."""
    starts = [r.get("from", 0) for r in runs]
    i = bisect.bisect_right(starts, iteration) - 1
    if i < 0:
        return None
    return {k: v for k, v in runs[i].items() if k != "from"}
