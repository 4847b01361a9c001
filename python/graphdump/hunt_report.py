"""The answer of ``graphdump hunt`` in words (the terminal's lines) and at the top of the HTML
report of the tensor dump (docs/hunt.md)."""
import html
import os
import subprocess

try:
    from . import hunt_blowup
    from ._whole_file import write_whole
except ImportError:  # hunt_cli.py run as a script (graphdump hunt)
    import hunt_blowup
    from _whole_file import write_whole


def _number(x):
    return "?" if x is None else f"{x:.6g}" if isinstance(x, float) else str(x)


def _rows_text(facts):
    if "all_zero_rows" not in facts:
        return ""
    count = facts["all_zero_row_count"]
    listed = ", ".join(str(r) for r in facts["all_zero_rows"])
    more = ", ..." if count > len(facts["all_zero_rows"]) else ""
    return (f"; {count} of {facts['rows']} rows all zero: [{listed}{more}]" if count else
            f"; no row all zero")


def input_text(facts):
    """'input 1 float32 (6, 1): min 0, max 5, 0 NaN, 0 Inf, 1 zero; 1 of 6 rows all zero: [4];
    row 4: all 1 element(s) zero'."""
    shape = "(" + ", ".join(str(d) for d in facts.get("shape", [])) + ")"
    if "error" in facts:
        return f"input {facts['slot']}: {facts['file']}: {facts['error']}"
    text = f"input {facts['slot']} {facts['dtype']} {shape}"
    if "min" not in facts:
        return text
    infinities = facts["pos_inf"] + facts["neg_inf"]
    text += (f": min {_number(facts['min'])}, max {_number(facts['max'])}, {facts['nan']} NaN, "
             f"{infinities} Inf, {facts['zeros']} zero(s) of {facts['elements']}")
    text += _rows_text(facts)
    row = facts.get("row")
    if row:
        if row["all_zero"]:
            text += f"; row {row['index']}: all {row['elements']} element(s) zero"
        elif row["nonfinite"] == row["elements"]:
            text += f"; row {row['index']}: all {row['elements']} element(s) non-finite"
        else:
            text += (f"; row {row['index']}: min {_number(row['min'])}, max "
                     f"{_number(row['max'])}, {row['zeros']} zero(s), {row['nonfinite']} "
                     f"non-finite of {row['elements']}")
    return text


def _position(answer):
    index = answer.get("first_index")
    if index is None:
        return "no position (statistics only)"
    text = "[" + ", ".join(str(i) for i in index) + "]"
    if not index:
        text += " (a 0-d tensor: its one element)"
    if answer.get("row") is not None:
        text += f", batch row {answer['row']}"
    return text


def answer_lines(answer):
    """The answer as lines of text (no trailing newlines)."""
    status = answer["status"]
    if status != "hit":
        return [answer["message"]]
    where = f"rank {answer['rank']}, " if answer.get("rank") is not None else ""
    lines = [f"{answer['check']} at iteration {answer['iteration']} ({where}graph "
             f"{answer['graph_id']}): {answer['verdict']}, {answer['verdict_detail']}",
             f"kernel: {answer['kernel']} ({answer['io']} {answer['slot']}"
             + (f", call {answer['call']}" if answer.get("call") else "") + ")",
             f"line: {answer['source_line'] or '(not recorded)'}"
             + (f": {answer['source_code']}" if answer.get("source_code") else "")]
    if answer.get("caller_line"):
        lines.append(f"called from: {answer['caller_line']}"
                     + (f": {answer['caller_code']}" if answer.get("caller_code") else ""))
    lines += [f"bad values: {answer['detail']}", f"first bad element: {_position(answer)}"]
    lines += hunt_blowup.lines(answer.get("blowup"))
    if answer["verdict"] == "persistent":
        lines.append(f"origin: {answer['origin']}: {answer['origin_detail']}")
        chain = answer.get("chain") or []
        if len(chain) > 1:
            lines.append("chain back to the creator:")
            for step in chain:
                lines.append(f"  rank {step['rank']} {step['kernel']} {step['io']} "
                             f"{step['slot']}: {step['how']}"
                             + (f" ({step['source_line']})" if step.get("source_line") else ""))
        creator = answer.get("creator")
        if creator:
            lines.append(f"the creator's inputs ({creator['kernel']}, rank {creator['rank']}"
                         + (f", {creator['source_line']}" if creator.get("source_line") else "")
                         + "):")
            lines += ["  " + input_text(facts) for facts in creator["inputs"]]
        for other in answer.get("other_ranks") or []:
            lines.append(f"rank {other['rank']}: first hit {other['kernel']} {other['io']} "
                         f"{other['slot']} at iteration {other['iteration']}; {other['how']}")
    else:
        runs = answer.get("runs") or {}
        lines.append("statistics of that tensor in both runs:")
        for name in ("pass1", "pass2"):
            row = runs.get(name)
            text = ("none (not dumped)" if row is None else
                    ", ".join(f"{k} {v}" for k, v in row.items()
                              if k in ("Max Value", "Min Value", "NaN Count",
                                       "Negative Inf Count", "Positive Inf Count",
                                       "Zero Count")))
            lines.append(f"  {name}: {text}")
    tensors = " and ".join(str(i) for i in answer["tensor_iterations"])
    lines.append(f"dumps: statistics of every iteration up to the hit: "
                 f"{answer['statistics_dump']}; " +
                 (f"tensors of iteration(s) {tensors}: {answer['tensor_dump']}"
                  if answer.get("tensor_dump") else
                  "no tensors (the rerun did not reach the hit iteration)"))
    if answer.get("report"):
        lines.append(f"report: {answer['report']}")
    if answer.get("answer_file"):
        lines.append(f"answer: {answer['answer_file']}")
    return lines


def answer_section(answer):
    """The report's first section: the answer, every text escaped."""
    items = "".join(f"<li>{html.escape(line)}</li>\n" for line in answer_lines(answer)
                    if not line.startswith("report:"))
    return ("<section id=\"hunt-answer\">\n<h2>graphdump hunt: the answer</h2>\n<ul>\n"
            f"{items}</ul>\n</section>\n")


class ReportRun:
    """`graphdump report DUMP`, started now (beside the hunt's other analysis); finish() puts
    the answer at its top and writes it whole to `out`."""

    def __init__(self, binary, dump, out, checks):
        self.out = out
        self.temporary = f"{out}.tmp{os.getpid()}.html"
        self.process = subprocess.Popen([binary, "report", dump, "-o", self.temporary,
                                         "--check", ",".join(checks)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def finish(self, answer):
        """The report's path, or None (answer['report_error'] then says why)."""
        try:
            _, err = self.process.communicate()
            if self.process.returncode != 0:
                answer["report_error"] = err.decode(errors="replace").strip()
                return None
            with open(self.temporary, encoding="utf-8") as f:
                page = f.read()
            at = page.find("</h1>\n")
            at = at + len("</h1>\n") if at >= 0 else 0
            answer["report"] = self.out
            write_whole(self.out, page[:at] + answer_section(answer) + page[at:])
            return self.out
        finally:
            if self.process.poll() is None:
                self.process.kill()
            if os.path.exists(self.temporary):
                os.unlink(self.temporary)
