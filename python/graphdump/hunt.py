"""``graphdump hunt`` and ``graphdump.hunt()`` (docs/hunt.md): from "my loss went NaN at some
step" to the kernel, line, element and cause, in two runs of the unchanged script.

Pass 1 runs the script under ``graphdump python`` with a statistic dump of every kernel and
ends it at the end of the first iteration with a hit (_hunt_child.py). Pass 2 runs it again from
its start with a tensor dump of that iteration and the one before, and ends it after them.
watch finds the first hit in each (across ranks, docs/analysis.md); the answer explains it
(hunt_answer.py) and a report opens on it (hunt_report.py).
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

try:
    from . import hunt_answer, hunt_blowup, hunt_report, hunt_verdict
    from ._whole_file import write_whole
except ImportError:  # hunt_cli.py run as a script (graphdump hunt): torch is not imported
    import hunt_answer
    import hunt_blowup
    import hunt_report
    import hunt_verdict
    from _whole_file import write_whole

CHECKS = ("nan", "inf", "overflow") + hunt_blowup.CHECKS
# l2norm: weight-change judges an update from its parameter's norms before and after.
STATISTICS = ["max", "min", "nan count", "negative inf count", "positive inf count", "zero count",
              "l2norm"]
# Exit statuses of `graphdump hunt` (docs/hunt.md).
EXIT_NO_HIT, EXIT_HIT, EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class HuntError(ValueError):
    """A usage or configuration error (exit 2): nothing was run, or the script refused it."""


class HuntFailed(RuntimeError):
    """The script failed before any hit, or a pass could not be analysed (exit 3)."""


def find_graphdump():
    """The graphdump executable: $GRAPHDUMP_BIN, else the build's tools/graphdump beside this
    package, else an installed bin/graphdump, else the one on PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("GRAPHDUMP_BIN", ""),
                  os.path.join(here, "..", "..", "tools", "graphdump"),
                  os.path.join(here, "..", "..", "..", "..", "bin", "graphdump"),
                  shutil.which("graphdump") or ""]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    raise HuntError("the graphdump executable was not found: set GRAPHDUMP_BIN (docs/hunt.md)")


def _write_whole(path, text):
    """Writes `path` under a new temporary name, then renames it: it appears whole or not at
    all, and nothing planted at either name is written through (_whole_file.py)."""
    write_whole(path, text)


def _known_check(check):
    """nan, inf, overflow; large, weight-change and loss-spike with an optional ':T' (a
    non-negative number, as graphdump watch takes it)."""
    name, colon, threshold = check.partition(":")
    if name not in CHECKS or (colon and name not in hunt_blowup.CHECKS):
        return False
    if not colon:
        return True
    try:
        return float(threshold) >= 0
    except ValueError:
        return False


def _parse_checks(text):
    checks = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in checks if not _known_check(c)]
    if not checks or bad:
        raise HuntError(f"--checks {text!r}: {', '.join(bad) or 'empty'} is not a check hunt "
                        f"takes (allowed: nan, inf, overflow, large[:T], weight-change[:T], "
                        f"loss-spike[:T], comma-separated)")
    return checks


def _base_settings(config):
    """What hunt keeps of the user's data_dump.json: net_name, initial_iteration and path
    (docs/hunt.md). Every rank dumps (the ranks agree on the hit iteration)."""
    if config is None:
        return {}
    try:
        with open(config, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise HuntError(f"--config {config}: {e.strerror}") from None
    except ValueError as e:
        raise HuntError(f"--config {config}: not valid JSON: {e}") from None
    common = data.get("common_dump_settings") if isinstance(data, dict) else None
    if not isinstance(common, dict):
        raise HuntError(f"--config {config}: no common_dump_settings object (hunt takes "
                        "MindSpore's dialect of data_dump.json, docs/configuration.md)")
    return {k: common[k] for k in ("net_name", "initial_iteration", "path")
            if k in common}


def _pass_config(base, net_name, path, saved_data, iteration, nproc):
    common = {"dump_mode": 0, "path": path, "net_name": net_name,
              "iteration": iteration, "saved_data": saved_data, "input_output": 0,
              "kernels": [], "support_device": list(range(max(nproc or 1, 8))),
              "statistic_category": STATISTICS}
    if "initial_iteration" in base:
        common["initial_iteration"] = base["initial_iteration"]
    # Pass 1 writes synchronously: its rows are read at each iteration's end. Pass 2's tensors
    # are written by background writers while the script runs on.
    return {"common_dump_settings": common,
            "e2e_dump_settings": {"enable": saved_data == "statistic"}}


class _Hunt:
    def __init__(self, script, args, module, checks, config, dump_path, nproc, overwrite, log):
        if (script is None) == (module is None):
            raise HuntError("give a script or -m MODULE")
        if script is not None and not os.path.isfile(script):
            raise HuntError(f"{script}: no such file")
        if config is not None and not os.path.isfile(config):
            raise HuntError(f"--config {config}: no such file")
        if nproc is not None and not 1 <= int(nproc) <= 1024:
            raise HuntError(f"--nproc {nproc}: takes a number of ranks from 1 to 1024")
        self.checks = _parse_checks(checks)
        self.base = _base_settings(config)
        root = dump_path or self.base.get("path") or "graphdump_hunt"
        self.root = os.path.abspath(root)
        self.target = (["-m", module] if module is not None else [script]) + list(args)
        stem = (module.rsplit(".", 1)[-1] if module is not None else
                os.path.splitext(os.path.basename(script))[0])
        self.net_name = self.base.get("net_name") or (
            "".join(c if (c.isascii() and c.isalnum()) or c in "-_" else "_" for c in stem)
            or "Net")
        self.nproc = int(nproc) if nproc else None
        self.overwrite = overwrite
        self.log = log
        self.binary = find_graphdump()
        self.state = os.path.join(self.root, ".hunt")
        self.times = {}
        self.ran_on_pass1 = None
        earlier = [n for n in ("pass1", "pass2", "answer.json", "report.html")
                   if os.path.exists(os.path.join(self.root, n))]
        if earlier and not overwrite:
            raise HuntError(f"{self.root} holds an earlier hunt ({', '.join(earlier)}): remove "
                            "it, give another --dump-path, or replace it with --overwrite")

    def say(self, message):
        self.log.write(f"graphdump hunt: {message}\n")
        self.log.flush()

    def prepare(self):
        try:
            os.makedirs(self.root, exist_ok=True)
            if self.overwrite:
                for name in ("answer.json", "report.html"):
                    if os.path.exists(os.path.join(self.root, name)):
                        os.unlink(os.path.join(self.root, name))
            shutil.rmtree(self.state, ignore_errors=True)
            os.makedirs(self.state)
        except OSError as e:
            raise HuntError(f"--dump-path {self.root}: cannot be prepared: "
                            f"{e.strerror or e}") from None

    def start_pass(self, name):
        """Starts the script under graphdump python, waiting (after Python and torch are
        loaded, before the script runs) for go(): pass 2 starts beside pass 1, so its start-up
        is paid while pass 1 runs."""
        command = [self.binary, "python", "--config", os.path.join(self.state, f"{name}.json")]
        # The passes run with the Python that runs the hunt (graphdump hunt --python's, or the
        # one graphdump.hunt() is called from): the script sees the same environment.
        if sys.executable:
            command += ["--python", sys.executable]
        if self.overwrite:
            command.append("--overwrite")
        if self.nproc:
            command += ["--nproc", str(self.nproc)]
        env = dict(os.environ, GRAPHDUMP_HUNT_WAIT=os.path.join(self.state, f"{name}.go"),
                   GRAPHDUMP_HUNT_PID=str(os.getpid()))
        env.pop("GRAPHDUMP_HUNT", None)
        # Its own process group: a Ctrl-C reaches the hunt, which passes one SIGINT on, so
        # that the script unwinds once and closes its dump.
        return subprocess.Popen(command + self.target, env=env, start_new_session=True)

    def go(self, name, saved_data, iteration, mode):
        """Writes the pass's configuration and lets it run ($GRAPHDUMP_HUNT's MODE|ARG)."""
        settings = _pass_config(self.base, self.net_name, os.path.join(self.root, name),
                                saved_data, iteration, self.nproc)
        _write_whole(os.path.join(self.state, f"{name}.json"), json.dumps(settings, indent=1))
        for stop in os.listdir(self.state):
            if stop.endswith(".stop"):
                os.unlink(os.path.join(self.state, stop))
        _write_whole(os.path.join(self.state, f"{name}.go"), f"{self.state}|{mode}")

    def cancel(self, name, child):
        """Ends a pass that has not been let run, and waits for it."""
        _write_whole(os.path.join(self.state, f"{name}.go"), "cancel")
        _wait_through_interrupts(child)

    def wait_pass(self, name, child):
        """Waits for a pass; returns its exit status (negative: killed by that signal)."""
        start = time.monotonic()
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            self.say(f"interrupted during {name}: waiting for the script to close its dump")
            _wait_through_interrupts(child)
            raise
        finally:
            self.times[name] = round(time.monotonic() - start, 3)

    def stopped_at(self):
        """The iteration the ranks stopped after (pass markers), or None."""
        iterations = []
        for name in os.listdir(self.state):
            if name.endswith(".stop"):
                with open(os.path.join(self.state, name), encoding="utf-8") as f:
                    iterations.append(json.load(f)["iteration"])
        return min(iterations) if iterations else None

    def ran_on(self):
        """The last iteration a rank's script trained on to after catching the SystemExit
        that ended its pass (pass markers' "ran_on"), or None."""
        ran = []
        for name in os.listdir(self.state):
            if name.endswith(".stop"):
                with open(os.path.join(self.state, name), encoding="utf-8") as f:
                    ran.append(json.load(f).get("ran_on"))
        ran = [r for r in ran if r is not None]
        return max(ran) if ran else None

    def tool(self, *args):
        """Starts `graphdump ARGS` printing JSON; .result() waits and parses it."""
        return _Tool([self.binary, *args])

    def watch(self, dump):
        """Starts watch --json of `dump` with the hunt's checks."""
        return self.tool("watch", dump, "--check", ",".join(self.checks), "--json", "-q")


class _Tool:
    """A graphdump analysis command running beside the hunt (they run in parallel)."""

    def __init__(self, command):
        self.name = command[1]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.parsed = None

    def result(self):
        """The command's JSON (parsed once). watch's exit status 3 (a check judged nothing, its
        JSON says which) is no failure."""
        if self.parsed is not None:
            return self.parsed
        out, err = self.process.communicate()
        allowed = (0, 1, 3) if self.name == "watch" else (0, 1)
        if self.process.returncode not in allowed:
            raise HuntFailed(f"graphdump {self.name} failed: "
                             f"{err.decode(errors='replace').strip()}")
        self.parsed = json.loads(out)
        return self.parsed


def _wait_through_interrupts(child):
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue


def _failure(status):
    return f"killed by signal {-status}" if status < 0 else f"exit status {status}"


def _interrupted(status):
    return status in (-signal.SIGINT, 128 + signal.SIGINT)


def _captured(dump):
    """Does a dump hold statistic rows of any iteration?"""
    return bool(glob.glob(os.path.join(glob.escape(dump), "rank_*", "*", "*", "[0-9]*",
                                       "statistic.csv")))


def _answer_skeleton(h):
    return {"status": None, "checks": h.checks, "command": h.target, "dump_root": h.root,
            "answer_file": None, "report": None, "times": h.times}


def _run(h):
    h.prepare()
    h.say(f"pass 1: running {' '.join(h.target)} with a statistic dump of every kernel "
          f"into {os.path.join(h.root, 'pass1')}")
    pass1 = h.start_pass("pass1")
    pass2 = None
    try:
        h.go("pass1", "statistic", "all", f"first-hit|{','.join(h.checks)}")
        pass2 = h.start_pass("pass2")
        status = h.wait_pass("pass1", pass1)
        return _after_pass1(h, status, pass2)
    finally:
        if pass2 is not None and pass2.poll() is None:
            h.cancel("pass2", pass2)


def _after_pass1(h, status, pass2_child):
    answer = _answer_skeleton(h)
    if _interrupted(status):
        raise KeyboardInterrupt
    pass1 = os.path.join(h.root, "pass1")
    if status == 2 and not os.path.isdir(pass1):
        raise HuntError("pass 1 ended with exit status 2 before dumping anything: the script's "
                        "or graphdump python's usage error (its message is above)")
    stopped = h.stopped_at()
    h.ran_on_pass1 = h.ran_on()
    # Stopped at a hit: the iteration is known, pass 1's watch runs beside pass 2.
    watch1 = h.watch(pass1) if os.path.isdir(pass1) else None
    watch1 = (hunt_answer.computed_hits(watch1.result()) if watch1 is not None and
              stopped is None else watch1)
    if watch1 is None or (stopped is None and not watch1["hits"]):
        answer["statistics_dump"] = pass1
        if status != 0:
            answer["status"] = "failed"
            answer["script_status"] = status
            answer["message"] = (f"the script failed ({_failure(status)}) before any hit "
                                 f"({', '.join(h.checks)}): nothing to hunt; its statistic dump "
                                 f"so far is in {pass1}")
        elif not _captured(pass1):
            # Nothing ran in the process graphdump python dumps: "no hit" would be a guess.
            answer["status"] = "failed"
            answer["script_status"] = status
            answer["message"] = (
                "the script ended normally, but pass 1 captured no iteration of its training: "
                "graphdump python dumps the torch.nn.Module calls and optimizer steps of the "
                "processes it starts (the script's, and the ranks of --nproc); a script that "
                "calls no module (graphdump python's warning above says so), or trains in "
                "processes it starts itself (torch.multiprocessing.spawn, multiprocessing with "
                "the spawn or forkserver start method, subprocess), has nothing to hunt. Train "
                "in the script's own process, or start the ranks with --nproc (docs/hunt.md, "
                "Limits)")
        else:
            answer["status"] = "no-hit"
            answer["message"] = (f"the script ended normally with no hit "
                                 f"({', '.join(h.checks)}); the statistic dump of every "
                                 f"iteration is in {pass1}")
        return answer
    hit_iteration = stopped if stopped is not None else watch1["hits"][0]["iteration"]
    h.say(f"pass 1: first hit at iteration {hit_iteration}"
          + (f", run ended after it ({h.times['pass1']} s)" if stopped is not None else
             f", the script ended by itself ({_failure(status)})" if status else ""))
    first_dumped = max(hit_iteration - 1, h.base.get("initial_iteration", 0))
    iterations = sorted({first_dumped, hit_iteration})
    selection = "|".join(str(i) for i in iterations)
    pass2 = os.path.join(h.root, "pass2")
    h.say(f"pass 2: running it again with a tensor dump of iteration(s) {selection} into "
          f"{pass2}")
    h.go("pass2", "full", selection, f"stop-after|{hit_iteration}")
    status2 = h.wait_pass("pass2", pass2_child)
    if _interrupted(status2):
        raise KeyboardInterrupt
    start = time.monotonic()
    if not isinstance(watch1, dict):
        watch1 = hunt_answer.computed_hits(watch1.result())
    if not watch1["hits"]:
        raise HuntFailed(f"pass 1 stopped after iteration {hit_iteration} but watch finds no "
                         f"hit in {pass1}")
    first1 = watch1["hits"][0]
    stopped2, ran_on2 = h.stopped_at(), h.ran_on()
    rerun = hunt_verdict.Rerun(pass1, pass2, hit_iteration, first_dumped, first1)
    # The report and the explanation are of the tensor dump when it is of the same run; else
    # of pass 1's statistics, which the answer then comes from.
    running = {"report": hunt_report.ReportRun(h.binary, pass2 if rerun.same_run() else pass1,
                                               os.path.join(h.root, "report.html"), h.checks)}
    if rerun.reached:
        running["watch2"] = h.watch(pass2)
        running["ls"] = h.tool("ls", pass2, "--json", "--kernels")
    watch2 = (hunt_answer.computed_hits(running["watch2"].result()) if rerun.reached else
              {"hits": []})
    first2 = next((x for x in watch2["hits"] if x["iteration"] == hit_iteration), None)
    answer["status"] = "hit"
    answer["statistics_dump"] = pass1
    answer["tensor_dump"] = pass2 if rerun.reached else None
    answer["tensor_iterations"] = iterations if rerun.reached else []
    if status2 != 0 and stopped2 is None:
        answer["pass2_status"] = status2
    for name, ran_on in (("pass1", h.ran_on_pass1), ("pass2", ran_on2)):
        if ran_on is not None:
            answer[f"{name}_ran_on"] = ran_on
            h.say(f"{name}: the script caught the SystemExit that ended it at the hit iteration "
                  f"and trained on to iteration {ran_on}; the hunt reads the iteration it was "
                  "ended at")
    answer["statistics_kernel"] = first1["kernel"]  # its name in pass 1's dump
    answer["verdict"], answer["verdict_detail"] = hunt_verdict.verdict(
        rerun, first1, first2, hit_iteration, _failure(status2) if status2 else None)
    if answer["verdict"] == "unconfirmed":
        h.say(f"pass 2: {answer['verdict_detail']}")
    persistent = answer["verdict"] == "persistent"
    source = first2 if persistent else first1
    answer.update({k: source.get(k) for k in ("iteration", "rank", "graph_id", "call",
                                               "kernel", "io", "slot", "check", "detail",
                                               "source_line", "first_index", "row")})
    trace = source.get("source_trace") or []
    answer["source_code"] = trace[0].get("code", "") if trace else ""
    for frame in trace:
        if source.get("source_line") in (f"{frame.get('file')}:{frame.get('line')}",
                                         f"{os.path.basename(frame.get('file', ''))}:"
                                         f"{frame.get('line')}"):
            answer["source_code"] = frame.get("code", "")
            break
    caller = hunt_answer.caller_frame(trace)
    if caller and f"{caller['file']}:{caller['line']}" == source.get("source_line"):
        caller = None  # a library's frame inside the kernel's own line (a scheduler's wrapper)
    answer["caller_line"] = f"{caller['file']}:{caller['line']}" if caller else None
    answer["caller_code"] = caller.get("code", "") if caller else None
    # A weight blown up by an update: the optimizer's step, its line, lr and update size.
    answer["blowup"] = hunt_blowup.explain(
        source, running["ls"].result() if "ls" in running else None,
        (pass2, pass1) if source is first2 else (pass1, pass2))
    if persistent:
        listing = running["ls"].result()
        answer.update(hunt_answer.explain(watch2, listing, first=first2))
        answer["other_ranks"] = hunt_answer.other_ranks(watch2, listing, first2)
    else:
        if "ls" in running:
            running["ls"].result()
        answer["origin"] = None
        answer["runs"] = rerun.rows
        answer["rerun_first_hit"] = first2
    answer["report"] = running["report"].finish(answer)
    h.times["analysis"] = round(time.monotonic() - start, 3)
    return answer


def hunt(script=None, args=(), *, module=None, checks="nan,inf", config=None, dump_path=None,
         nproc=None, overwrite=False, log=None):
    """Runs ``graphdump hunt`` on a script (or ``module=`` for ``-m MODULE``) with `args`, and
    returns the answer as a dict (fields: docs/hunt.md; also written to DUMP_PATH/answer.json).

    checks: 'nan', 'inf', 'overflow', and for blow-ups 'large', 'weight-change', 'loss-spike'
    (each with an optional ':T', as graphdump watch takes it), comma-separated. config: a data_dump.json whose net_name,
    support_device, initial_iteration and path are kept. dump_path: where pass1/, pass2/,
    answer.json and report.html go (default: the configuration's path, else
    ./graphdump_hunt). nproc: ranks on this machine, as ``graphdump python --nproc``.
    log: where progress lines go (default sys.stderr).

    Raises HuntError (a ValueError) for a usage error, HuntFailed when an analysis step fails,
    and KeyboardInterrupt after the script has closed its dump when interrupted. A script that
    fails before any hit gives status 'failed', one that never hits 'no-hit'.
    """
    h = _Hunt(script, list(args), module, checks, config, dump_path, nproc, overwrite,
              log or sys.stderr)
    try:
        answer = _run(h)
    finally:
        shutil.rmtree(h.state, ignore_errors=True)
    answer["answer_file"] = os.path.join(h.root, "answer.json")
    _write_whole(answer["answer_file"], json.dumps(answer, indent=1, default=str) + "\n")
    return answer
