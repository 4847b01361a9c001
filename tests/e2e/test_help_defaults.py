"""Every default an analysis command's --help shows is the default it applies: giving the shown
value explicitly changes nothing (report once showed --atol=1e-08 --rtol=1e-05 while applying
each dtype's standard)."""
import os
import re

import numpy as np

import analysis_dumps as d

SHOWN_DEFAULT = re.compile(r"^\s+(?:-\w,)?(--[a-z][a-z-]*) [A-Z]+(?::[A-Z]+)?=(\S+)")


def shown_defaults(command):
    p = d.graphdump(*command.split(), "--help")
    assert p.returncode == 0, f"{command} --help"
    return [m.groups() for m in map(SHOWN_DEFAULT.match, p.stdout.splitlines()) if m]


def test_shown_defaults_are_applied(scratch):
    ref = d.simple_net(n=4)
    test = [dict(k) for k in ref]
    # Beyond torch.allclose's 1e-5 but within the float32 standard's small-value floor, and one
    # kernel far off: defaults that differ from what is applied would change the verdicts.
    test[1] = dict(ref[1], outputs=[ref[1]['outputs'][0] + np.float32(3e-5)])
    nan = ref[3]['outputs'][0].copy()
    nan[2, 1] = np.nan
    test[3] = dict(ref[3], outputs=[nan])
    a, b = os.path.join(scratch, "a"), os.path.join(scratch, "b")
    d.write_dump(a, {0: test, 1: test})
    d.write_dump(b, {0: ref, 1: ref})

    def outputs(command, extra):
        """What the command says: stdout, stderr and the file it writes (if any)."""
        html = os.path.join(scratch, "out.html")
        if os.path.exists(html):
            os.remove(html)
        args = {"watch": ["watch", a, "-q"],
                "compare": ["compare", a, b, "-q", "--json"],
                "report": ["report", "--compare", a, b, "-o", html],
                "ls": ["ls", a, "--json"],
                "trace": ["trace", a, "model.py:11", "--json"]}[command]
        p = d.graphdump(*args, *extra)
        written = open(html).read() if os.path.exists(html) else ""
        return p.returncode, p.stdout, p.stderr, written

    checked = []
    for command in ("watch", "compare", "report", "ls", "trace"):
        baseline = outputs(command, [])
        for option, value in shown_defaults(command):
            checked.append(f"{command} {option}")
            assert outputs(command, [option, value]) == baseline, \
                f"{command} --help shows {option}={value}, but giving it changes the result"
    assert ({"watch --check", "watch --limit", "report --check", "report --max-kernels"} <=
            set(checked)), f"the shown defaults were found: {checked}"
    report_help = d.graphdump("report", "--help").stdout
    assert "--atol FLOAT=" not in report_help and "dtype's standard" in report_help, \
        f"report --help names the standard as the default tolerance:\n{report_help}"
