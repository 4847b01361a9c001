"""The rank side of ``graphdump hunt`` (docs/hunt.md): inside a script run by ``graphdump
python`` with $GRAPHDUMP_HUNT set, ends the run at the end of an iteration, once the hunt has
what it needs from it. With $GRAPHDUMP_HUNT_WAIT=FILE, ``graphdump python`` first waits, with
Python and torch loaded, until the hunt writes FILE: 'cancel' (exit 0, the script not run) or
the value of $GRAPHDUMP_HUNT for this pass.

$GRAPHDUMP_HUNT is ``STATE_DIR|MODE|ARG``:
  - ``STATE_DIR|first-hit|CHECKS``: pass 1. At the end of each iteration (an optimizer step)
    this rank's statistic.csv rows of that iteration are read; a NaN (and, for inf/overflow
    checks, an infinity or a value beyond float16's range) is a hit; with a blow-up check
    (large, weight-change, loss-spike) watch judges this rank's dump so far at each iteration. With several ranks the
    ranks agree on it (one all-reduce of one number on the default process group), so that all
    stop at the same step.
  - ``STATE_DIR|stop-after|N``: pass 2. The run ends once iteration N has ended.
Pass 2 also loads what the script will load first thing, while pass 1 runs: torch imports
``torch._dynamo`` (over a second) when the script makes its optimizer. Pass 1 notes that import
in STATE_DIR/rank_{rank}.dynamo with a digest of the environment the script had then; a
waiting pass 2 of the same rank whose environment has the same digest imports it before its
script starts. A script that changes its environment before that point (Dynamo and Inductor
read settings from it when imported) gets another digest, and pass 2 leaves the import to it.
Ending the run: STATE_DIR/rank_{rank}.stop is written (whole: temporary name, then rename)
with the iteration, and SystemExit(0) is raised from the optimizer's step(): the script
unwinds (its finally blocks run), and the dump closes with every file whole. A script that
catches it and trains on gets it again at each later step; the stop file keeps the first
iteration and notes the last one it ran on to ("ran_on").
"""
import csv
import glob
import hashlib
import json
import os
import sys
import time

import torch

from . import _graphdump

_FLOAT16_MAX = 65504.0
# statistic.csv column titles by configuration name (the statistic catalogue).
_TITLE = {name: title for name, title, _ in _graphdump.statistic_catalogue()}


class HuntStop(SystemExit):
    """Raised from optimizer.step() when ``graphdump hunt`` has what it needs from the run."""


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _row_suspect(row, checks):
    """Does a statistic.csv row show a NaN (always a hit) or, for inf/overflow, an infinity or
    a value beyond float16's range? Returns 'nan', 'inf' or None."""
    if (_number(row.get(_TITLE["nan count"])) or 0) > 0:
        return "nan"
    if "inf" in checks or "overflow" in checks:
        infinities = ((_number(row.get(_TITLE["positive inf count"])) or 0) +
                      (_number(row.get(_TITLE["negative inf count"])) or 0))
        if infinities > 0:
            return "inf"
    if "overflow" in checks:
        for column in (_TITLE["max"], _TITLE["min"]):
            value = _number(row.get(column))
            if value is not None and abs(value) > _FLOAT16_MAX:
                return "inf"
    return None


def _iteration_suspects(root, iteration, checks):
    """'nan' when a statistic row of `iteration` under the rank directory `root` holds a NaN,
    'inf' when one holds only infinities (or large values), None when none does."""
    from .hunt_answer import overwritten_input
    found = None
    for path in glob.glob(os.path.join(glob.escape(root), "*", "*", str(iteration),
                                       "statistic.csv")):
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            for row in csv.DictReader(f):
                if overwritten_input(row.get("IO"), row.get("Slot") or 0, row.get("Op Type")):
                    continue
                kind = _row_suspect(row, checks)
                if kind == "nan":
                    return "nan"
                found = found or kind
    return found


def _hit_in(root, iteration, checks):
    """Is there a watch hit (docs/analysis.md, "What counts as a hit") in `iteration`?"""
    suspect = _iteration_suspects(root, iteration, checks)
    if suspect == "nan":
        return True
    blowups = any(c.split(":", 1)[0] in ("large", "weight-change", "loss-spike") for c in checks)
    if suspect != "inf" and not blowups:
        return False
    # Infinities only: an attention mask's masked_fill(-inf) is no hit; a blow-up (a large
    # value, an update's change, a loss against the losses before) needs the iterations
    # before. watch decides, over this rank's dump so far.
    from .hunt_answer import computed_hits
    result = computed_hits(json.loads(_graphdump.watch(root, ",".join(checks), False)))
    return any(h.get("iteration") == iteration for h in result["hits"])


def _agree(hit):
    """With several ranks: did any rank hit? (every rank calls this at the same step)."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return hit
    flag = torch.tensor([1 if hit else 0], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _write_stop(state_dir, rank, iteration, ran_on=None):
    """STATE_DIR/rank_{rank}.stop: the iteration the pass was ended at, and (ran_on) the last
    iteration a script that caught the SystemExit trained on to."""
    from ._whole_file import write_whole
    stop = {"iteration": iteration, "rank": rank}
    if ran_on is not None:
        stop["ran_on"] = ran_on
    write_whole(os.path.join(state_dir, f"rank_{rank}.stop"), json.dumps(stop))


class _Stopper:
    def __init__(self, spec):
        parts = spec.rsplit("|", 2)
        if len(parts) != 3 or parts[1] not in ("first-hit", "stop-after"):
            raise ValueError(f"$GRAPHDUMP_HUNT: expected STATE_DIR|first-hit|CHECKS or "
                             f"STATE_DIR|stop-after|N, found {spec!r}")
        self.state_dir, self.mode, arg = parts
        self.checks = arg.split(",") if self.mode == "first-hit" else []
        self.stop_after = int(arg) if self.mode == "stop-after" else None
        self.stopped = None  # the iteration this pass was ended at

    def after_iteration(self, dump, iteration):
        """Called by graphdump.torch after an optimizer step ended `iteration`."""
        if iteration is None:
            return
        hunt = int(os.environ.get("GRAPHDUMP_HUNT_PID", "0") or 0)
        if hunt and not _alive(hunt):
            # Nobody reads this pass any more (the hunt was killed): end it, as a failure.
            raise HuntStop(f"graphdump hunt (pid {hunt}) is gone: this pass ends")
        if self.stopped is not None:
            # The script caught the SystemExit and trains on: the pass's iteration stays the
            # first one (the hunt reads that), the iterations it ran on are noted, and each
            # step raises again.
            from .torch import _rank
            _write_stop(self.state_dir, _rank(), self.stopped, ran_on=iteration)
            raise HuntStop(0)
        if self.mode == "stop-after":
            stop = iteration >= self.stop_after
        else:
            summary = dump.summary
            local = summary is not None and _hit_in(summary["root"], iteration, self.checks)
            stop = _agree(local)
        if stop:
            from .torch import _rank
            self.stopped = iteration
            _write_stop(self.state_dir, _rank(), iteration)
            raise HuntStop(0)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


_DYNAMO = "torch._dynamo"


def _environment_digest():
    """A digest of this process's environment, graphdump's own variables left out (the hunt
    sets them differently for each pass)."""
    settings = sorted((k, v) for k, v in os.environ.items() if not k.startswith("GRAPHDUMP_"))
    return hashlib.sha256(json.dumps(settings).encode()).hexdigest()


def _dynamo_marker(state_dir):
    return os.path.join(state_dir, f"rank_{os.environ.get('RANK', '0') or '0'}.dynamo")


class _NoteDynamoImport:
    """Pass 1: a finder on sys.meta_path that finds nothing, but notes (the rank's .dynamo
    marker) the environment the script had when torch._dynamo was first imported."""

    def __init__(self, state_dir):
        self.state_dir = state_dir

    def find_spec(self, name, path=None, target=None):
        if name == _DYNAMO:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            from ._whole_file import write_whole
            try:
                write_whole(_dynamo_marker(self.state_dir), _environment_digest())
            except OSError:
                pass  # pass 2 then leaves the import to its script
        return None


def _preload_dynamo(state_dir):
    """Pass 2: imports torch._dynamo now when pass 1's script imported it with this
    environment. True once there is nothing left to wait for (done, or never to be done)."""
    if _DYNAMO in sys.modules:
        return True
    try:
        with open(_dynamo_marker(state_dir), encoding="utf-8") as f:
            noted = f.read()
    except OSError:
        return False  # not (yet) imported by pass 1's script
    if noted == _environment_digest():
        try:
            __import__(_DYNAMO)
        except Exception:  # noqa: BLE001 - the script's own import says what is wrong
            pass
    return True


def wait_for_go(path):
    """Waits until the hunt writes `path` ($GRAPHDUMP_HUNT_WAIT): 'cancel', or the pass's
    $GRAPHDUMP_HUNT, which is set. Returns False for cancel, and when the hunt is gone (its
    state directory removed, this process's parent changed, or the hunt's process,
    $GRAPHDUMP_HUNT_PID, ended)."""
    parent = os.getppid()
    hunt = int(os.environ.get("GRAPHDUMP_HUNT_PID", "0") or 0)
    directory = os.path.dirname(path)
    polls = 0
    preloaded = False
    while not os.path.exists(path):
        if os.getppid() != parent or not os.path.isdir(directory):
            return False
        polls += 1
        if hunt and polls % 100 == 0 and not _alive(hunt):
            return False
        preloaded = preloaded or _preload_dynamo(directory)
        time.sleep(0.01)
    with open(path, encoding="utf-8") as f:
        spec = f.read()
    if spec == "cancel":
        return False
    if not preloaded:
        _preload_dynamo(directory)  # a pass 1 that ended before this pass got here
    os.environ["GRAPHDUMP_HUNT"] = spec
    return True


def install(spec):
    """Ends the run as $GRAPHDUMP_HUNT says (graphdump.torch calls the stopper at each
    iteration's end)."""
    from . import _torch_state
    stopper = _Stopper(spec)
    _torch_state.after_iteration = stopper.after_iteration
    if stopper.mode == "first-hit" and _DYNAMO not in sys.modules:
        sys.meta_path.insert(0, _NoteDynamoImport(stopper.state_dir))
