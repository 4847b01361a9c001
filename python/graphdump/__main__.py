"""``graphdump python`` (and ``python -m graphdump``): runs your own PyTorch script unchanged,
dumping the kernels of the modules it calls (docs/python.md)."""
import os
import runpy
import signal
import sys

USAGE = "usage: graphdump python [--python PATH] [--config FILE] [--overwrite] [--nproc N] " \
        "SCRIPT [ARGS...]\n" \
        "       graphdump python [--python PATH] [--config FILE] [--overwrite] [--nproc N] " \
        "-m MODULE [ARGS...]\n" \
        "       graphdump python --precision bf16|fp16 [--keep-fp32 ENTRY...] [--steps N] " \
        "[--config FILE] SCRIPT [ARGS...]\n"

HELP = USAGE + """
Runs SCRIPT with your environment's Python exactly as `python SCRIPT ARGS` would, with
dumping on: every TorchScript module it calls (torch.jit.script, torch.jit.trace,
torch.jit.load) runs its forward through graphdump's executor, one graph per module in
first-call order; the backward passes it runs (loss.backward()) are dumped as Gradients/...
kernels; each step() of a torch.optim optimizer dumps one update kernel per parameter and ends
an iteration (without an optimizer, each call of the first module starts one). Plain
nn.Modules run as they are, their ATen operators seen at the dispatcher. What the training
computes is not changed, unless --precision asks for a precision run.

The Python is --python's; else the python3 beside the graphdump executable, which is your
environment's when graphdump is installed into it (pip install, or make install into the
environment's prefix: a virtual or conda environment's bin/); else the Python graphdump was
built with.

options:
  --python PATH   run the script with this Python (its environment's torch and packages); an
                  error (exit 2) when PATH is not an executable file
  --config FILE   data_dump.json (default: $GRAPHDUMP_CONFIG, else $MINDSPORE_DUMP_CONFIG;
                  neither set: the script runs with dumping off)
  --overwrite     replace an earlier dump in the dump path (each rank's rank_{id} directory)
                  in one step; without it, a path that holds one is an error: one run per
                  directory. A directory a live run is dumping into is never replaced
  --nproc N       start N ranks of the script on this machine, as torchrun does: each gets
                  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, its output lines
                  prefixed [rank k]; when one fails the others are stopped
  -m MODULE       run a library module as a script, as python -m MODULE
  --precision P   a precision run (bf16 or fp16): every floating kernel the script calls
                  computes in P, the modules' floating parameters and buffers are cast to P in
                  place and float32 data is rounded to P where a kernel reads it, as a real P
                  model computes; kernel names are those of the float32 dump, so the two dumps
                  compare (docs/precision.md). fp32: the script as it is
  --keep-fp32 ENTRY...
                  with --precision bf16/fp16: these kernels compute in float32 and these
                  parameters or buffers keep their float32 values. ENTRY: a kernel's full name
                  as the dump, compare and bisect print it (Default/sin-op3), an op type (sin),
                  name-regex(RE), or a parameter's or buffer's dotted name (pos.freqs). The
                  entries end at the next option, at `--`, or at the script (an existing .py
                  file). An entry that matches nothing by the end of the run is an error (exit
                  2) naming it and what exists nearby
  --steps N       stop the script after N optimizer steps (without an optimizer: N calls of
                  the first module it calls), as if it had ended there
  --              ends the options: the script follows
  -h, --help      this help
Options go before SCRIPT; everything after it is the script's.

The rank is torch.distributed's once the script has initialised a process group (else $RANK,
else 0); each rank dumps into rank_{rank}, and support_device says which ranks dump. Ranks
started by another launcher run `graphdump python` as their program, e.g.
  torchrun --nproc_per_node 2 --no_python graphdump python train.py

examples:
  graphdump python --config data_dump.json train.py --epochs 1
  graphdump python --precision bf16 --config data_dump.json train.py
  graphdump python --precision bf16 --keep-fp32 Default/sin-op3 pos.freqs train.py
  graphdump python --config data_dump.json --nproc 2 train_ddp.py
  GRAPHDUMP_CONFIG=$PWD/data_dump.json graphdump python train.py
  MINDSPORE_DUMP_CONFIG=/abs/data_dump.json graphdump python -m mypackage.train

The exit status is the script's; 2 for a bad command line or configuration (no script run);
128+N after signal N (SIGTERM, SIGHUP), once the dump is closed with every file whole.
A summary of what was written goes to stderr when the script ends.
"""


def _usage_error(message):
    sys.stderr.write(f"graphdump python: error: {message}\n{USAGE}"
                     "(graphdump python --help for more)\n")
    return 2


def _ends_entries(arg):
    return arg.startswith("-") or (arg.endswith(".py") and os.path.isfile(arg))


def _parse(argv, precision):
    """(config, module, script, args) or an exit code; --precision, --keep-fp32 and --steps go
    into the dict `precision`."""
    config = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            sys.stdout.write(HELP)
            return 0
        if arg in ("--precision", "--steps"):
            if i + 1 >= len(argv):
                return _usage_error(f"{arg} needs a value")
            precision[arg[2:]] = argv[i + 1]
            i += 2
            continue
        if arg == "--keep-fp32":
            i += 1
            start = i
            while i < len(argv) and not _ends_entries(argv[i]):
                i += 1
            if i == start:
                return _usage_error("--keep-fp32 needs at least one kernel or parameter")
            precision.setdefault("keep", []).extend(argv[start:i])
            continue
        if arg == "--":
            if i + 1 >= len(argv):
                return _usage_error("no script given after --")
            return config, None, argv[i + 1], argv[i + 2:]
        if arg == "--config" or arg.startswith("--config="):
            if arg == "--config":
                if i + 1 >= len(argv):
                    return _usage_error("--config needs a file")
                config, i = argv[i + 1], i + 2
            else:
                config, i = arg.split("=", 1)[1], i + 1
            continue
        if arg == "--overwrite":
            os.environ["GRAPHDUMP_OVERWRITE"] = "1"
            i += 1
            continue
        if arg == "-m":
            if i + 1 >= len(argv):
                return _usage_error("-m needs a module name")
            return config, argv[i + 1], None, argv[i + 2:]
        if arg.startswith("-"):
            return _usage_error(f"unknown option {arg} (options go before the script)")
        return config, None, arg, argv[i + 1:]
    return _usage_error("no script given")


def _human_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} bytes"


def _print_summary(summary):
    if summary is None:
        return
    log = sys.stderr
    log.write(f"graphdump: dump: {summary['root']}\n")
    # How many tensors the statistic rows were computed from (each read once), and their bytes.
    computed = (f" ({summary['statistics_computed']} tensors summarised, "
                f"{_human_bytes(summary['statistics_bytes'])} read)"
                if summary["statistic_rows"] else "")
    log.write(f"graphdump: dump: {summary['files']} tensor files, "
              f"{_human_bytes(summary['bytes'])}, {summary['kernels_dumped']} kernel dumps, "
              f"{summary['statistic_rows']} statistic rows{computed}; "
              f"{summary['graphs']} graph(s), {summary['calls']} module call(s), "
              f"{summary['optimizer_steps']} optimizer step(s)\n")
    log.flush()


def _terminate(signum, frame):
    # Unwinds the script like an exception, so the dump is closed and every file is whole.
    raise SystemExit(128 + signum)


def _precision_run(options):
    """A PrecisionRun for the --precision options, None without them, or an exit code."""
    from .precision import PRECISIONS, PrecisionRun
    if not options:
        return None
    precision = options.get("precision")
    if precision is None:
        return _usage_error("--keep-fp32 and --steps need --precision bf16|fp16 (or fp32)")
    if precision not in PRECISIONS:
        return _usage_error(f"--precision {precision}: use bf16, fp16 or fp32")
    if options.get("keep") and precision == "fp32":
        return _usage_error("--keep-fp32 needs --precision bf16 or fp16 (fp32 keeps everything)")
    steps = options.get("steps")
    if steps is not None:
        if not steps.isdigit() or int(steps) < 1:
            return _usage_error(f"--steps {steps}: a number of steps, 1 or more")
        steps = int(steps)
    return PrecisionRun(precision, options.get("keep", ()), steps,
                        os.environ.get("GRAPHDUMP_PRECISION_OUT"))


def main(argv):
    if os.environ.get("GRAPHDUMP_HUNT_WAIT"):
        from . import _hunt_child  # graphdump hunt's second pass, started early (docs/hunt.md)
        if not _hunt_child.wait_for_go(os.environ.pop("GRAPHDUMP_HUNT_WAIT")):
            return 0
    options = {}
    parsed = _parse(argv, options)
    if isinstance(parsed, int):
        return parsed
    config, module, script, args = parsed
    run = _precision_run(options)
    if isinstance(run, int):
        return run
    if script is not None and not os.path.isfile(script):
        return _usage_error(f"{script}: no such file")
    if config is not None and not os.path.isfile(config):
        return _usage_error(f"--config {config}: no such file")
    from . import ConfigError
    from .torch import Dump
    name = module.rsplit(".", 1)[-1] if module else os.path.splitext(os.path.basename(script))[0]
    try:
        dump = Dump(config, auto=True, name=name)
    except ConfigError as e:
        sys.stderr.write(f"graphdump python: error: {e}\n")
        return 2
    # SIGTERM and SIGHUP (a closed terminal, an ended ssh session) end the script as SIGTERM
    # always did here: closed dump, whole files, queued tensors written. One that is ignored
    # (nohup) stays ignored.
    for stop in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(stop) != signal.SIG_IGN:
            signal.signal(stop, _terminate)
    dump._precision = run
    if os.environ.get("GRAPHDUMP_HUNT"):
        from . import _hunt_child  # graphdump hunt's passes (docs/hunt.md)
        _hunt_child.install(os.environ["GRAPHDUMP_HUNT"])
    dump.start()
    error = None
    unmatched = []
    try:
        if module is not None:
            sys.argv = [module] + args
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [script] + args
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
    except ConfigError as e:
        # The dump could not start (e.g. the path holds an earlier run), or a malformed
        # --keep-fp32 entry: a usage error.
        sys.stderr.write(f"graphdump python: error: {e}\n")
        return 2
    except SystemExit as e:
        if e.code not in (0, None):
            error = f"the script exited with status {e.code}"
            raise
    except BaseException as e:
        error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise
    finally:
        if run is not None and error is None:
            unmatched = run.finish(dump._host)
        _print_summary(dump.close(error=error))
    if unmatched:
        from .precision import report_unmatched
        report_unmatched(unmatched)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
