"""``graphdump hunt`` (python PACKAGE/graphdump/hunt_cli.py, run as a script so that the hunt
itself never imports torch; python -m graphdump.hunt_cli works too): the command line of
graphdump.hunt() (docs/hunt.md)."""
import os
import sys

USAGE = ("usage: graphdump hunt [--checks LIST] [--config FILE] [--dump-path DIR] [--nproc N] "
         "[--overwrite] [--python PATH] SCRIPT [ARGS...]\n"
         "       graphdump hunt [options] -m MODULE [ARGS...]\n")

HELP = USAGE + """
Finds where your training first goes bad (NaN, and with --checks infinities, float16
overflow, or a blow-up: large values, an update that blew a weight up, a loss spike) and why,
in two runs of your unchanged script (docs/hunt.md):

  pass 1  runs SCRIPT ARGS under `graphdump python` with a statistic dump of every kernel
          (NaN and infinity counts, min, max) and ends the run at the end of the first
          iteration (optimizer step) with a hit: the script sees SystemExit(0) raised from
          optimizer.step(), so its finally blocks run and the dump closes whole
  pass 2  runs it again from its start, with the same arguments, dumping every kernel's
          tensors in that iteration and the one before, and ends after them

then prints the answer: the iteration, rank, kernel and your source line; the first bad
element's index and batch row; whether the hit reproduced on the rerun with the same
statistics (persistent) or not (transient: both runs' statistics of the tensor are shown), or
whether the rerun was not the same run up to the hit (unconfirmed: it failed or ended before
the hit, or resumed from a checkpoint; the answer is the first run's); whether the kernel
created the non-finite values from finite inputs or received them (the chain back to the
kernel that created them, across ranks through all-reduce); the creator's inputs, row by row
(a divisor whose row is all zero); and where the dumps and an HTML report are.

options:
  --checks LIST    what is a hit: nan, inf, overflow, large[:T], weight-change[:T],
                   loss-spike[:T] (graphdump watch's checks), comma-separated (default
                   nan,inf); infinities an operator writes on purpose (masked_fill(-inf)) are
                   not hits. A weight blown up by an optimizer update is named at its
                   optimizer.step(): the optimizer, the step, its line, its lr and the
                   update's size against the step before
  --config FILE    a data_dump.json whose net_name, initial_iteration and path are kept; the
                   rest of each pass's configuration is hunt's own
  --dump-path DIR  where pass1/ (statistics), pass2/ (tensors), answer.json and report.html
                   go (default: the configuration's path, else ./graphdump_hunt)
  --nproc N        start N ranks of the script on this machine, as graphdump python --nproc
  --overwrite      replace an earlier hunt in DIR
  --python PATH    run the hunt and both passes of the script with this Python, as graphdump
                   python --python (default: the python3 beside the graphdump executable, your
                   environment's when graphdump is installed into it, else the Python
                   graphdump was built with)
  -m MODULE        run a library module as a script, as python -m MODULE
  -h, --help       this help
Options go before SCRIPT; everything after it is the script's.

examples:
  graphdump hunt train.py --epochs 3
  graphdump hunt --checks nan,inf,overflow --dump-path /tmp/hunt --nproc 2 train_ddp.py
  graphdump hunt --checks large,weight-change,loss-spike train.py

exit status: 0 no hit (the script ended normally; the statistic dump is kept), 1 a hit was
found and explained, 2 usage or configuration error (nothing run, or the script refused the
configuration), 3 the script failed before any hit, pass 1 captured no iteration of its
training (training in processes the script spawns), or an analysis step failed, 130
interrupted (Ctrl-C: the running pass is ended and its dump closed whole; no answer).
"""


def _usage_error(message):
    sys.stderr.write(f"graphdump hunt: error: {message}\n{USAGE}(graphdump hunt --help for "
                     "more)\n")
    return 2


_VALUED = {"--checks": "checks", "--config": "config", "--dump-path": "dump_path",
           "--nproc": "nproc"}


def _parse(argv):
    """The keyword arguments of graphdump.hunt(), or an exit status."""
    options = {"checks": "nan,inf"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            sys.stdout.write(HELP)
            return 0
        name, equals, value = arg.partition("=")
        if name in _VALUED:
            if not equals:
                if i + 1 >= len(argv):
                    return _usage_error(f"{name} needs a value")
                value, i = argv[i + 1], i + 1
            if name == "--nproc" and (not value.isdigit() or not 1 <= int(value) <= 1024):
                return _usage_error(f"--nproc {value}: takes a number of ranks from 1 to 1024")
            options[_VALUED[name]] = value
            i += 1
            continue
        if arg == "--overwrite":
            options["overwrite"] = True
            i += 1
            continue
        if arg == "-m":
            if i + 1 >= len(argv):
                return _usage_error("-m needs a module name")
            options["module"], options["args"] = argv[i + 1], argv[i + 2:]
            return options
        if arg.startswith("-"):
            return _usage_error(f"unknown option {arg} (options go before the script)")
        options["script"], options["args"] = arg, argv[i + 1:]
        return options
    return _usage_error("no script given")


def main(argv):
    options = _parse(argv)
    if isinstance(options, int):
        return options
    try:
        from .hunt import (EXIT_FAILED, EXIT_HIT, EXIT_INTERRUPTED, EXIT_NO_HIT, HuntError,
                           HuntFailed, hunt)
        from .hunt_report import answer_lines
    except ImportError:  # run as a script (graphdump hunt): the package, and torch, unloaded
        from hunt import (EXIT_FAILED, EXIT_HIT, EXIT_INTERRUPTED, EXIT_NO_HIT, HuntError,
                          HuntFailed, hunt)
        from hunt_report import answer_lines
    try:
        answer = hunt(**options)
    except HuntError as e:
        return _usage_error(str(e))
    except HuntFailed as e:
        sys.stderr.write(f"graphdump hunt: error: {e}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        sys.stderr.write("graphdump hunt: interrupted: no answer; the dump of the pass that "
                         "ran is closed whole (its .dump_metadata/INCOMPLETE says why)\n")
        return EXIT_INTERRUPTED
    sys.stdout.write("graphdump hunt: " + "\n  ".join(answer_lines(answer)) + "\n")
    sys.stdout.flush()
    if answer["status"] == "failed":
        return EXIT_FAILED
    return EXIT_HIT if answer["status"] == "hit" else EXIT_NO_HIT


if __name__ == "__main__":
    if os.environ.get("GRAPHDUMP_HUNT"):
        sys.stderr.write("graphdump hunt: error: GRAPHDUMP_HUNT is set: a hunt does not run "
                         "inside a hunt's pass\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
