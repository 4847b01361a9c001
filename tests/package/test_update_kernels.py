"""Reading the optimizers' hyperparameters back from a dump (docs/python.md, "Optimizer update
kernels"): each update kernel's `.ir` attributes name its optimizer and group, whose runs are the
lines of graphs/hyperparameters.jsonl with the same two numbers. Two optimizers with a group 0
each stay apart; lines that are not such objects (a cut-off line, text, booleans for numbers) are
skipped; a dump whose `.ir` kept the runs itself (graphdump before 2026-12) still reads. No
torch: the reader is the one load() and hunt use."""
import json

from graphdump import update_kernels

IR = """\
  %1(Default/optimizer-AdamW/w/AdamW-op3) = AdamW(%0) {optimizer: 0, param_group: 0}
      # In file train.py(48)/optimizer.step()/
      # Fullname with scope: (Default/optimizer-AdamW/w/AdamW-op3)
  %2(Default/optimizer-SGD/b/SGD-op4) = SGD(%0) {optimizer: 1, param_group: 0}
      # Fullname with scope: (Default/optimizer-SGD/b/SGD-op4)
  %3(Default/fc-Linear/linear-op0) = linear(%0) {param_group: 0}
      # Fullname with scope: (Default/fc-Linear/linear-op0)
  %4(Default/optimizer-AdamW/v/AdamW-op5) = AdamW(%0) {optimizer: 0, param_group: 7}
      # Fullname with scope: (Default/optimizer-AdamW/v/AdamW-op5)
"""


def line(iteration, optimizer, group, **values):
    return json.dumps({"iteration": iteration, "optimizer": optimizer, "param_group": group,
                       **values})


def write(tmp_path, ir, log):
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "ms_output_trace_code_graph_0.ir").write_text(ir)
    if log is not None:
        (graphs / "hyperparameters.jsonl").write_text(log)
    return str(graphs / "ms_output_trace_code_graph_0.ir")


def test_each_kernel_gets_its_own_optimizers_group(tmp_path):
    log = "\n".join([line(0, 0, 0, lr=0.5, betas=[0.9, 0.99]), line(0, 1, 0, lr=0.1, momentum=0.9),
                     line(3, 0, 0, lr=0.25, betas=[0.9, 0.99]), ""])
    found = update_kernels.read_ir(write(tmp_path, IR, log))
    # The linear kernel is no update kernel; group 7 of optimizer 0 has no line: left out.
    assert set(found) == {"Default/optimizer-AdamW/w/AdamW-op3", "Default/optimizer-SGD/b/SGD-op4"}
    group, runs = found["Default/optimizer-AdamW/w/AdamW-op3"]
    assert group == 0
    assert [update_kernels.at_iteration(runs, i)["lr"] for i in range(5)] == [0.5, 0.5, 0.5,
                                                                             0.25, 0.25]
    assert update_kernels.at_iteration(runs, 3) == {"lr": 0.25, "betas": [0.9, 0.99]}
    group, runs = found["Default/optimizer-SGD/b/SGD-op4"]
    assert update_kernels.at_iteration(runs, 4) == {"lr": 0.1, "momentum": 0.9}


def test_lines_that_are_not_hyperparameters_are_skipped(tmp_path):
    log = "\n".join([
        line(0, 0, 0, lr=0.5),
        "not json",
        json.dumps([1, 2]),
        json.dumps({"iteration": True, "optimizer": 0, "param_group": 0, "lr": 9.0}),
        json.dumps({"iteration": 2, "optimizer": "0", "param_group": 0, "lr": 9.0}),
        json.dumps({"iteration": 2, "param_group": 0, "lr": 9.0}),
        line(4, 0, 0, lr=0.125)[:-7],  # cut off
    ])
    group, runs = update_kernels.read_ir(write(tmp_path, IR, log))[
        "Default/optimizer-AdamW/w/AdamW-op3"]
    assert runs == [{"from": 0, "lr": 0.5}]


def test_no_hyperparameters_file_no_kernels(tmp_path):
    assert update_kernels.read_ir(write(tmp_path, IR, None)) == {}
    assert update_kernels.read_ir(str(tmp_path / "absent.ir")) == {}


def test_a_dump_whose_ir_kept_the_runs_still_reads(tmp_path):
    runs = [{"from": 0, "lr": 0.01}, {"from": 4, "lr": 100.0}]
    ir = ("  %1(Default/optimizer-AdamW/w/AdamW-op3) = AdamW(%0) "
          f"{{hyperparameters: {json.dumps(runs)}, param_group: 2}}\n"
          "      # Fullname with scope: (Default/optimizer-AdamW/w/AdamW-op3)\n")
    assert update_kernels.read_ir(write(tmp_path, ir, None)) == {
        "Default/optimizer-AdamW/w/AdamW-op3": (2, runs)}


def test_one_parse_of_a_ranks_file_serves_its_graphs(tmp_path):
    path = write(tmp_path, IR, line(0, 0, 0, lr=0.5) + "\n")
    parsed = {}
    first = update_kernels.read_ir(path, parsed)
    assert list(parsed) == [str(tmp_path / "graphs" / "hyperparameters.jsonl")]
    (tmp_path / "graphs" / "hyperparameters.jsonl").write_text("")
    assert update_kernels.read_ir(path, parsed) == first  # read once
