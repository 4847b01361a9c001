"""``graphdump run MODEL.pt2``: an ExportedProgram (torch.export.save) run node by node, each ATen
node of its graph a kernel, dumped as the configuration selects (docs/cli-run-train.md, "run
an exported program"). Not an API: the CLI runs it as ``python -m graphdump._exported``.

The program is loaded with torch.export.load and its module() (the graph with its parameters)
runs through a torch.fx.Interpreter whose run_node hands each ATen node's inputs and outputs to
the host, as the generated code of a torch.compile'd graph does (_compiled.py): the graph is
one graph of the dump, registered once, and each step is one call of it and one iteration. The
file is data: its nodes' names, module paths and stack traces name kernels and lines; nothing
in it chooses where files go.
"""
import os
import sys

USAGE = ("usage: graphdump run MODEL.pt2 [--input FILE.npy]... [--input-shape 2x3x224x224] "
         "[--steps N] [--seed S]\n"
         "                     [--config FILE] [--dump-path DIR] [--overwrite] "
         "[--save-output OUT.npy]\n")

HELP = USAGE + """
Runs an exported program (torch.export.save, a .pt2 file) node by node: every ATen node of its
graph is a kernel, named by the module it came from (nn_module_stack) as a TorchScript model's
kernels are (Default/conv1-Conv2d/conv2d-op0), with the source lines torch.export recorded.
Each step runs the program's module() once on the inputs, without autograd; each step is one
iteration. What is dumped follows the configuration (docs/configuration.md).

options:
  --input FILE.npy      one model input per option, in order
  --input-shape SHAPE   without --input: one input torch.randn(SHAPE) after torch.manual_seed(S)
                        (default 1x3x224x224)
  --steps N             steps to run (default 1)
  --seed S              seed for the random input (default 0)
  --config FILE         data_dump.json (default: $GRAPHDUMP_CONFIG, else $MINDSPORE_DUMP_CONFIG;
                        neither: the program runs without dumping)
  --dump-path DIR       replaces the configuration's path
  --overwrite           replace an earlier dump in the dump path
  --save-output OUT.npy the last step's output tensor (a program with one tensor output)
The other options of `graphdump run` (--precision, --keep-fp32, --list-kernels, --set-dump, the
GE dialect's flags) are for TorchScript models: given with a .pt2 file they are an error.
"""

_VALUED = ("--input", "--input-shape", "--steps", "--seed", "--config", "--dump-path",
           "--save-output")


def _usage_error(message):
    sys.stderr.write(f"graphdump run: error: {message}\n{USAGE}(graphdump run --help for more)\n")
    return 2


def _parse(argv):
    """A dict of the options, or an exit code."""
    options = {"--input": [], "--input-shape": "1x3x224x224", "--steps": "1", "--seed": "0",
               "--overwrite": False}
    model = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, value = (arg.split("=", 1) + [None])[:2] if arg.startswith("--") else (arg, None)
        if arg in ("-h", "--help"):
            sys.stdout.write(HELP)
            return 0
        if name in _VALUED:
            if value is None:
                if i + 1 >= len(argv):
                    return _usage_error(f"{name} needs a value")
                value, i = argv[i + 1], i + 1
            if name == "--input":
                options[name].append(value)
            else:
                options[name] = value
        elif arg == "--overwrite":
            options["--overwrite"] = True
        elif arg.startswith("-"):
            return _usage_error(f"{name}: not an option for an exported program (.pt2); it "
                                "runs with --input, --input-shape, --steps, --seed, --config, "
                                "--dump-path, --overwrite and --save-output")
        elif model is None:
            model = arg
        else:
            return _usage_error(f"unexpected argument {arg} (one model file)")
        i += 1
    if model is None:
        return _usage_error("no model given")
    options["model"] = model
    return options


def _shape(text):
    parts = text.split("x")
    if not all(p.isdigit() and len(p) <= 9 and int(p) > 0 for p in parts):
        raise ValueError(f"--input-shape '{text}': positive sizes separated by 'x', e.g. "
                         "2x3x224x224")
    return [int(p) for p in parts]


def _count(name, text, low):
    if not text.isdigit() or int(text) < low:
        raise ValueError(f"{name} {text}: a whole number, {low} or more")
    return int(text)


def _output_problem(path):
    """Why `path` cannot take the output file, or ''. Only new paths and regular files."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"its directory {directory} does not exist"
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isfile(path)):
        return "not a regular file (only new paths and regular files are written)"
    if not os.access(directory, os.W_OK):
        return f"its directory {directory} is not writable"
    return ""


def main(argv):
    options = _parse(argv)
    if isinstance(options, int):
        return options
    model = options["model"]
    try:
        shape = _shape(options["--input-shape"])
        steps = _count("--steps", options["--steps"], 1)
        seed = _count("--seed", options["--seed"], 0)
    except ValueError as e:
        return _usage_error(str(e))
    for path, what in [(model, "model")] + [(p, "--input") for p in options["--input"]]:
        if not os.path.isfile(path):
            return _usage_error(f"{what} {path}: no such file")
    config = options.get("--config")
    if config is not None and not os.path.isfile(config):
        return _usage_error(f"--config {config}: no such file")
    save = options.get("--save-output")
    if save and _output_problem(save):
        return _usage_error(f"--save-output {save}: {_output_problem(save)}")

    import numpy as np
    import torch

    from . import ConfigError
    from . import _graphdump as _C
    from .torch import Dump
    try:
        loaded = _C.load_config(config, options.get("--dump-path"))
    except ConfigError as e:
        return _usage_error(str(e))
    inputs = []
    for path in options["--input"]:
        try:
            inputs.append(torch.from_numpy(np.load(path, allow_pickle=False)))
        except (OSError, ValueError) as e:
            return _usage_error(f"--input {path}: not a NumPy .npy file of numbers ({e})")
    if not inputs:
        torch.manual_seed(seed)
        inputs.append(torch.randn(shape))
    try:
        program = torch.export.load(model)
    except Exception as e:  # a corrupt or foreign archive: torch says why
        sys.stderr.write(f"graphdump run: error: {model}: not an exported program "
                         f"(torch.export.load: {type(e).__name__}: {e})\n")
        return 2
    module = program.module()
    name = os.path.splitext(os.path.basename(model))[0]
    dump = Dump(config, name=name, overwrite=options["--overwrite"])
    dump._config = loaded  # the configuration with --dump-path's path
    from . import _export_graph
    error, last = None, None
    try:
        dump.start()
        dump._open_host()  # the session opens before the first step, not at a module call
        runner = _export_graph.Runner(module, name, dump)
        with torch.no_grad():
            for step in range(steps):
                last = runner.run(inputs)
                print(f"step {step + 1}/{steps}: {_describe(last)}", flush=True)
    except ConfigError as e:
        sys.stderr.write(f"graphdump run: error: {e}\n")
        return 2
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
        sys.stderr.write(f"graphdump run: error: {error}\n")
    finally:
        summary = dump.close(error=error)
    if error is not None:
        return 3
    if summary is not None:
        sys.stderr.write(f"graphdump: dump: {summary['root']}\n")
    if save:
        if not isinstance(last, torch.Tensor):
            sys.stderr.write(f"graphdump run: error: --save-output {save}: the program's output "
                             f"is {_describe(last)}, not a tensor; nothing was written\n")
            return 2
        _save(save, last)
    return 0


def _describe(value):
    import torch
    if isinstance(value, torch.Tensor):
        return f"tensor {list(value.shape)} {value.dtype}".replace("torch.", "")
    return type(value).__name__


def _save(path, tensor):
    """Writes `tensor` as .npy, whole or not at all (a bfloat16 tensor widened to float32)."""
    import numpy as np
    import torch
    value = tensor.detach().cpu()
    if value.dtype == torch.bfloat16:
        value = value.float()
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as f:
        np.save(f, value.numpy())
    os.replace(temporary, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
