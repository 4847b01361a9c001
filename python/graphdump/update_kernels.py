"""The optimizer's update kernels as a dump's graph files record them (docs/file-format.md,
"Update kernels"): each `Default/optimizer-{Class}/...` kernel's parameter group and its
group's hyperparameters by iteration, from the kernel's `.ir` entry. Used by load() (its
hyperparameter columns) and by graphdump hunt (the blown-up step's lr); imports neither torch
nor pandas."""
import bisect
import json
import re

# The hyperparameters load() gives columns to, in this order (those the dump records).
HYPERPARAMETERS = ("lr", "betas", "momentum", "dampening", "weight_decay", "eps", "alpha",
                   "nesterov", "amsgrad", "maximize")
_GROUP = re.compile(r"[{ ]param_group: (-?\d+)[,}]")
_FULLNAME = "# Fullname with scope: ("
_RUNS = "{hyperparameters: "


def is_update_kernel(full_name):
    """Is `full_name` an optimizer's update kernel (Default/optimizer-{Class}/...)?"""
    return full_name.startswith("Default/optimizer-")


def parse_ir(text):
    """{full name: (param_group, runs)} of the update kernels an .ir text records; runs are
    [{"from": ITERATION, "lr": ..., ...}] in iteration order. Kernels without hyperparameters
    (and text that is not JSON) are left out."""
    found = {}
    pending = None  # (group, runs) of the last node line, until its Fullname line
    for line in text.splitlines():
        at = line.find(_RUNS)
        if at >= 0:
            try:
                runs, _ = json.JSONDecoder().raw_decode(line, at + len(_RUNS))
            except ValueError:
                runs = None
            group = _GROUP.search(line)
            pending = ((int(group.group(1)) if group else None, runs)
                       if isinstance(runs, list) and all(isinstance(r, dict) for r in runs)
                       else None)
            continue
        at = line.find(_FULLNAME)
        if at >= 0:
            if pending is not None:
                name = line[at + len(_FULLNAME):line.rfind(")")]
                found[name] = pending
            pending = None
    return found


def read_ir(path):
    """parse_ir of the .ir file at `path`; {} when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse_ir(f.read())
    except OSError:
        return {}


def at_iteration(runs, iteration):
    """The hyperparameters of `runs` in force at `iteration` (the last run starting at or before
    it), without "from"; None when none had started."""
    starts = [r.get("from", 0) for r in runs]
    i = bisect.bisect_right(starts, iteration) - 1
    if i < 0:
        return None
    return {k: v for k, v in runs[i].items() if k != "from"}
