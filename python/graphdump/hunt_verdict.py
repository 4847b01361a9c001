"""Did ``graphdump hunt``'s rerun reproduce the hit (docs/hunt.md, "Did it reproduce?"): was pass
2 the same run as pass 1 up to the hit (it reached the hit iteration; the iteration before it has
the same statistics), and does the first hit's tensor have the same statistics in both passes?
Values are compared, never watch's wording of them (pass 1's hits come from statistic rows,
pass 2's from tensors, and watch words the two differently)."""
import collections
import csv
import glob
import math
import os
import re

try:
    from .hunt_answer import (_statistic_rows, count_text, kernel_without_id, statistic_row,
                              tensor_key)
except ImportError:  # hunt_cli.py run as a script (graphdump hunt)
    from hunt_answer import (_statistic_rows, count_text, kernel_without_id, statistic_row,
                             tensor_key)

# The statistic.csv columns both passes write (hunt.STATISTICS), and those that say which
# tensor a row is.
STATISTIC_COLUMNS = ("Max Value", "Min Value", "NaN Count", "Negative Inf Count",
                     "Positive Inf Count", "Zero Count")
_TENSOR_COLUMNS = ("Op Type", "IO", "Slot", "Data Type", "Shape")
# Digits the same-run check compares values to: a rerun's reductions may add in another order
# (a GPU's atomics) without being another run.
SAME_RUN_DIGITS = 5


def _value(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return text


def _equal(a, b):
    a, b = _value(a), _value(b)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


# Columns that say where and when a row was written, not what its tensor holds.
_PLACE_COLUMNS = ("Op Name", "Task ID", "Stream ID", "Timestamp")


def same_statistics(row1, row2):
    """Do two statistic.csv rows (dicts by column title) describe the same tensor (type, shape)
    with the same value of every statistic either holds?"""
    if row1 is None or row2 is None:
        return False
    columns = sorted((set(row1) | set(row2)) - set(_PLACE_COLUMNS))
    return all(_equal(row1.get(c), row2.get(c)) for c in columns)


def _call_slots(dump_root, hit):
    """The (io, slot) of every statistic row of the hit's kernel in its iteration."""
    name = re.sub(r"[/\\. ]", "_", hit["kernel"])
    slots = []
    for row in _statistic_rows(dump_root, hit):
        key = (row.get("IO"), int(row.get("Slot") or 0))
        if row.get("Op Name") == name and key not in slots:
            slots.append(key)
    return slots


def statistics_text(row):
    """'Max Value 3, Min Value -1, NaN Count 8, ...' of a statistic row, or 'none'."""
    if row is None:
        return "none (not dumped)"
    return ", ".join(f"{c} {row[c]}" for c in STATISTIC_COLUMNS if c in row)


def _rounded(text):
    value = _value(text)
    return f"{value:.{SAME_RUN_DIGITS}g}" if isinstance(value, float) else value


def _iteration_rows(dump_root, iteration):
    """Every statistic.csv row of `iteration` in a dump, as hashable tuples: (rank, graph,
    kernel name without -op{N}, io, slot, type, shape, statistics to SAME_RUN_DIGITS)."""
    rows = []
    pattern = os.path.join(glob.escape(dump_root), "rank_*", "*", "*", str(iteration),
                           "statistic.csv")
    for path in sorted(glob.glob(pattern)):
        parts = path.split(os.sep)
        rank, graph = parts[-5], parts[-3]
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            for row in csv.DictReader(f):
                rows.append((rank, graph, kernel_without_id(row.get("Op Name", "")),
                             row.get("IO"), row.get("Slot"), row.get("Data Type"),
                             row.get("Shape"))
                            + tuple(_rounded(row.get(c)) for c in STATISTIC_COLUMNS))
    return rows


def has_iteration(dump_root, iteration):
    """Does a dump hold statistic rows of `iteration` (of any rank)?"""
    return bool(glob.glob(os.path.join(glob.escape(dump_root), "rank_*", "*", "*",
                                       str(iteration), "statistic.csv")))


def _row_text(row):
    rank, graph, kernel, io, slot = row[:5]
    values = ", ".join(f"{c} {v}" for c, v in zip(STATISTIC_COLUMNS, row[7:]))
    return f"{kernel} {io} {slot} ({rank}, graph {graph}): {values}"


def run_difference(pass1, pass2, iteration):
    """None when pass 2's statistic rows of `iteration` are pass 1's (the same kernels, tensors
    and values to SAME_RUN_DIGITS digits), else the difference in words."""
    rows1, rows2 = _iteration_rows(pass1, iteration), _iteration_rows(pass2, iteration)
    if not rows2:
        return f"the rerun dumped no statistics of iteration {iteration}"
    only1 = collections.Counter(rows1) - collections.Counter(rows2)
    only2 = collections.Counter(rows2) - collections.Counter(rows1)
    if not only1 and not only2:
        return None
    differing = sum(only1.values()) + sum(only2.values())
    text = (f"iteration {iteration} differs: {sum(only1.values())} of its {len(rows1)} "
            f"statistic rows in the first run and {sum(only2.values())} of {len(rows2)} in the "
            "rerun have no equal in the other")
    if only1:
        first = min(only1)
        theirs = sorted(r for r in only2 if r[:5] == first[:5])
        text += (f"; first: {_row_text(first)} in the first run, " +
                 (", ".join(f"{c} {v}" for c, v in zip(STATISTIC_COLUMNS, theirs[0][7:]))
                  if theirs else "no such tensor") + " in the rerun")
    elif differing:
        text += f"; first: {_row_text(min(only2))} in the rerun only"
    return text


def same_tensor(a, b):
    """Do two watch hits name the same tensor (kernel names compared without -op{N})?"""
    if a is None or b is None:
        return False
    ka, kb = list(tensor_key(a)), list(tensor_key(b))
    ka[3], kb[3] = kernel_without_id(ka[3]), kernel_without_id(kb[3])
    return ka == kb


class Rerun:
    """What pass 2 was, against pass 1: `reached` (it dumped the hit iteration), `difference`
    (None, or how its iteration before the hit differs from pass 1's: then it was not the same
    run), and the first hit's statistic rows in both (`rows`)."""

    def __init__(self, pass1, pass2, hit_iteration, first_dumped, first1):
        self.reached = os.path.isdir(pass2) and has_iteration(pass2, hit_iteration)
        self.difference = None
        if self.reached and first_dumped < hit_iteration:
            self.difference = run_difference(pass1, pass2, first_dumped)
        self.rows = {"pass1": statistic_row(pass1, first1),
                     "pass2": (statistic_row(pass2, first1, named_in=pass1) if self.reached
                               else None)}
        # Every input and output of the hit's kernel call, in both passes: a tensor holding NaN
        # has NaN as its min and max, so its own row shows only counts; the call's finite
        # inputs show whether it computed from the same values.
        self.call_rows = []
        if self.reached:
            for io, slot in _call_slots(pass1, first1):
                tensor = dict(first1, io=io, slot=slot)
                self.call_rows.append(((io, slot), statistic_row(pass1, tensor),
                                       statistic_row(pass2, tensor, named_in=pass1)))

    def differing_call_tensor(self):
        """The first (io, slot, pass 1's row, pass 2's row) of the hit's kernel call whose
        statistics differ between the passes, or None."""
        for (io, slot), row1, row2 in self.call_rows:
            if not same_statistics(row1, row2):
                return io, slot, row1, row2
        return None

    def same_run(self):
        return self.reached and self.difference is None

    def persistent(self, first1, first2):
        """The same run, whose first hit in the hit iteration is the same tensor as pass 1's,
        with the same statistics (counts of NaN, infinities and zeros, min and max)."""
        return (self.same_run() and same_tensor(first1, first2) and
                same_statistics(self.rows["pass1"], self.rows["pass2"]) and
                self.differing_call_tensor() is None)


def verdict(rerun, first1, first2, hit_iteration, failure):
    """(verdict, verdict_detail): 'persistent', 'transient', or 'unconfirmed' when pass 2 was
    not the same run up to the hit (then the answer is pass 1's). `failure` is how pass 2 ended
    when it did not end with status 0 ('exit status 1'), else None."""
    from_pass1 = "; the answer is the first run's (its statistics only)"
    if not rerun.reached:
        how = (f"it failed ({failure}) before that iteration's files were written" if failure
               else "it ended by itself before that iteration (the rerun ran fewer "
                    "iterations)")
        return "unconfirmed", f"the rerun did not reach iteration {hit_iteration}: {how}" + \
            from_pass1
    if rerun.difference is not None:
        return "unconfirmed", (
            "the rerun is not the same run as the first (a script that resumes from its own "
            "checkpoint, draws other data or other initial weights, or counts its iterations "
            f"differently): {rerun.difference}" + from_pass1)
    rows = rerun.rows
    if rerun.persistent(first1, first2):
        return "persistent", (
            "reproduced on a rerun: the same kernel's same tensor, and each input and output "
            "of that kernel call, have the same statistics (NaN, infinity and zero counts, "
            f"min, max); the hit: {count_text(first2)}")
    if first2 is None:
        why = "the rerun had no hit in that iteration"
    elif same_tensor(first1, first2):
        io, slot, row1, row2 = rerun.differing_call_tensor() or (
            first1["io"], first1["slot"], rows["pass1"], rows["pass2"])
        which = ("same tensor" if (io, slot) == (first1["io"], first1["slot"]) else
                 f"same kernel call's {io} {slot}")
        why = (f"the rerun's {which} has other statistics ({statistics_text(row1)} in the "
               f"first run; {statistics_text(row2)} in the rerun)")
    else:
        why = (f"the rerun's first hit there is {first2['kernel']} {first2['io']} "
               f"{first2['slot']} (rank {first2['rank']}): {count_text(first2)}")
    return "transient", "not reproduced on a rerun: " + why
