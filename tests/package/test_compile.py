"""torch.compile'd training under `graphdump python` (docs/compile.md): compiled_train.py run
plain and dumped (every kernel, tensors and statistics), unchanged.

What the dump holds, checked here:
  - each graph Inductor generated is a graph of the dump (forward and backward, and a new one
    for each compilation: after a graph break, after a recompilation), after the eager graph of
    the compiled module (graph 0), whose kernels are what ran eagerly between compiled graphs;
  - a kernel is a generated C++ kernel or an extern call of the generated code, named after
    the module its operators come from and the operators it fused
    (Default/qkv-Linear/addmm-op1, Default/FusionOp_mul_erf_add-op6,
    Gradients/Default/down-Linear/mm-op0), with the operators and the script's lines in the .ir;
  - its files are the buffers it read and wrote, as they were then: a kernel's input is its
    producer's output, the last kernel's output gives the loss the script printed, and every
    statistic equals NumPy's on the file;
  - the trained parameters are bit-identical to the plain compiled run's.
"""
import csv
import glob
import os
import re

import numpy as np
import pytest

from conftest import (BUILD_DIR, HERE, execution_order, global_order, graphdump, marked_line,
                      python, write_config)

SCRIPT = os.path.join(HERE, "compiled_train.py")


def script_line(marker):
    return marked_line(SCRIPT, marker)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compile")
    done = {}

    def run(mode):
        if mode not in done:
            plain = python(SCRIPT, mode, tmp / f"{mode}_plain.npz", check=0)
            config = write_config(tmp / f"{mode}.json", tmp / mode,
                                  {"saved_data": "full"})
            dumped = graphdump("python", "--config", config, SCRIPT, mode,
                               tmp / f"{mode}_dumped.npz", check=0)
            rank = tmp / mode / "rank_0"
            done[mode] = {"plain_run": plain, "run": dumped, "rank": rank,
                          "plain": np.load(tmp / f"{mode}_plain.npz"),
                          "dumped": np.load(tmp / f"{mode}_dumped.npz")}
        return done[mode]

    return run


def graph_order(rank, graph):
    return execution_order(rank, graph)


def rows(rank, graph, iteration):
    with open(rank / "Net" / str(graph) / str(iteration) / "statistic.csv") as f:
        return list(csv.DictReader(f))


def tensor(rank, graph, iteration, full_name, io, slot):
    op_type = full_name.rsplit("/", 1)[1].rsplit("-op", 1)[0]
    name = re.sub(r"[/\\. ]", "_", full_name)
    found = glob.glob(str(rank / "Net" / str(graph) / str(iteration) /
                          f"{op_type}.{name}.0.0.*.{io}.{slot}.*.npy"))
    assert len(found) == 1, (full_name, io, slot, found)
    return np.load(found[0])


def graphs(rank):
    return sorted(int(re.search(r"graph_(\d+)\.ir$", p).group(1))
                  for p in glob.glob(str(rank / "graphs" / "*.ir")))


@pytest.mark.parametrize("mode", ["block", "break", "raise"])
def test_parameters_bit_identical_to_the_plain_compiled_run(runs, mode):
    r = runs(mode)
    assert r["plain_run"].stdout == r["run"].stdout
    assert sorted(r["plain"].files) == sorted(r["dumped"].files)
    for key in r["plain"].files:
        assert np.array_equal(r["plain"][key], r["dumped"][key]), key
    assert "Traceback" not in r["run"].stderr, r["run"].stderr


def test_forward_and_backward_graphs_are_inductors_kernels(runs):
    r = runs("block")
    rank = r["rank"]
    assert graphs(rank) == [0, 1, 2]
    forward = [re.sub(r"-op\d+$", "", k) for k in graph_order(rank, 1)]
    assert forward[1] == "Default/qkv-Linear/addmm"
    assert forward[0].startswith("Default/norm1-LayerNorm/FusionOp_")
    assert "Default/_scaled_dot_product_flash_attention_for_cpu" in forward
    assert "Default/up-Linear/addmm" in forward and "Default/down-Linear/addmm" in forward
    gelu = forward[forward.index("Default/up-Linear/addmm") + 1]
    assert gelu.startswith("Default/FusionOp_") and "erf" in gelu, forward
    backward = graph_order(rank, 2)
    assert backward[0] == "Gradients/Default/down-Linear/mm-op0"
    assert all(k.startswith("Gradients/Default/") for k in backward)
    assert any("flash_attention_for_cpu_backward" in k for k in backward), backward
    # The compiled region's extern calls are its kernels, not eager ones of graph 0.
    eager = graph_order(rank, 0)
    assert not [k for k in eager if re.search(r"/(addmm|mm|linear)-op\d+$", k)], eager
    assert "Gradients/Default/CompiledFunctionBackward-op" in "\n".join(eager)
    # Three steps: each graph ran in iterations 0, 1, 2.
    for g in (1, 2):
        assert sorted(os.listdir(rank / "Net" / str(g))) == ["0", "1", "2"]


def test_ir_lists_each_kernels_fused_operators_with_the_scripts_lines(runs):
    rank = runs("block")["rank"]
    ir = (rank / "graphs" / "ms_output_trace_code_graph_1.ir").read_text()
    attention, up = script_line("attention"), script_line("mlp up")
    block = re.search(r"\n  %\d+\(_scaled_dot_product_flash_attention_for_cpu\).*?(?=\n  %|\n})",
                      ir, re.S).group(0)
    assert f"aten._scaled_dot_product_flash_attention_for_cpu.default (compiled_train.py:" \
           f"{attention})" in block, block
    assert f"In file {SCRIPT}({attention})" in block or \
        f"compiled_train.py({attention})" in block, block
    gelu = re.search(r"\n  %\d+\(FusionOp_[a-z_]*erf[a-z_]*\).*?(?=\n  %|\n})", ir, re.S).group(0)
    assert "aten.erf.default" in gelu and "aten.mul.Tensor" in gelu, gelu
    assert f"compiled_train.py({up})" in gelu, gelu
    assert "inductor_kernel: cpp_fused_" in gelu, gelu
    # The GELU's input is the up projection's output (its producer's name).
    assert "%Default/up-Linear/addmm-op" in gelu, gelu


def test_files_are_the_buffers_as_they_were(runs):
    r = runs("block")
    rank = r["rank"]
    forward = graph_order(rank, 1)
    up = next(k for k in forward if k.startswith("Default/up-Linear/addmm"))
    gelu = forward[forward.index(up) + 1]
    for it in range(3):
        produced = tensor(rank, 1, it, up, "output", 0)
        assert produced.shape == (16, 128)
        assert np.array_equal(produced, tensor(rank, 1, it, gelu, "input", 0))
        # The graph's last kernel writes the block's output: the loss the script printed.
        out = tensor(rank, 1, it, forward[-1], "output", 0).astype(np.float64)
        assert np.isclose((out ** 2).mean(), r["plain"]["losses"][it], rtol=1e-5)


def test_asynchronous_dump_of_outputs_only_holds_the_synchronous_dumps_files(runs, tmp_path):
    """Background writers (e2e_dump_settings.enable false), outputs only (input_output 2), one
    iteration: every compiled kernel's outputs, no input, each file equal to the synchronous
    full dump's, and the training unchanged."""
    config = write_config(tmp_path / "a.json", tmp_path / "dump",
                          {"saved_data": "tensor", "input_output": 2, "iteration": "1"},
                          {"enable": False})
    graphdump("python", "--config", config, SCRIPT, "block", tmp_path / "out.npz", check=0)
    r = runs("block")
    dumped = np.load(tmp_path / "out.npz")
    for key in r["plain"].files:
        assert np.array_equal(r["plain"][key], dumped[key]), key
    rank = tmp_path / "dump" / "rank_0"
    assert sorted(os.listdir(rank / "Net" / "1")) == ["1"]
    for graph in (1, 2):
        files = glob.glob(str(rank / "Net" / str(graph) / "1" / "*.npy"))
        assert files and not [f for f in files if ".input." in f], files
        for kernel in graph_order(rank, graph):
            assert np.array_equal(tensor(rank, graph, 1, kernel, "output", 0),
                                  tensor(r["rank"], graph, 1, kernel, "output", 0)), kernel


def test_statistics_equal_numpys_on_the_dumped_buffers(runs):
    rank = runs("block")["rank"]
    checked = 0
    for graph in (1, 2):
        for it in range(3):
            for row in rows(rank, graph, it):
                full_name = next(k for k in graph_order(rank, graph)
                                 if re.sub(r"[/\\. ]", "_", k) == row["Op Name"])
                a = tensor(rank, graph, it, full_name, row["IO"], row["Slot"])
                if a.dtype == np.bool_ or a.size == 0:
                    continue
                a = a.astype(np.float64)
                for column, value in (("Max Value", a.max()), ("Min Value", a.min()),
                                      ("L2Norm Value", np.sqrt((a * a).sum()))):
                    assert np.isclose(float(row[column]), value, rtol=1e-4, atol=1e-6), \
                        (row, column, value)
                checked += 1
    assert checked > 100, checked



def test_a_statistic_dump_has_the_statistics_of_a_full_dump(runs, tmp_path):
    """A statistic dump alone reuses, for a kernel's input, the statistics of the kernel of the
    same call that wrote the buffer last (docs/compile.md): the rows are those a full dump
    computes from the buffers, kernel by kernel. Its statistics are read on graphdump's worker
    thread, held behind here: a generated kernel writing a buffer still queued (Inductor reuses
    buffers) waits until it has been read."""
    full = runs("block")["rank"]
    config = write_config(tmp_path / "stat.json", tmp_path / "dump", {"saved_data": "statistic"})
    graphdump("python", "--config", config, SCRIPT, "block", tmp_path / "out.npz", check=0,
              env={"GRAPHDUMP_TEST_STATISTICS_DELAY_US": "2000",
                   "GRAPHDUMP_STATISTICS_THREAD": "1"})
    rank = tmp_path / "dump" / "rank_0"
    checked = 0
    for graph in (1, 2):
        for it in range(3):
            got, want = rows(rank, graph, it), rows(full, graph, it)
            assert [(r["Op Name"], r["IO"], r["Slot"]) for r in got] == \
                [(r["Op Name"], r["IO"], r["Slot"]) for r in want]
            outputs = {(r["Op Name"], r["Shape"]) for r in want if r["IO"] == "output"}
            for g, w in zip(got, want):
                # A buffer a kernel writes may be read before it is written (a fresh buffer's
                # bytes, another in each run): an input shaped as one of its kernel's outputs.
                if g["IO"] == "input" and (g["Op Name"], g["Shape"]) in outputs:
                    continue
                assert {k: v for k, v in g.items() if k != "Timestamp"} == \
                    {k: v for k, v in w.items() if k != "Timestamp"}, (g, w)
                checked += g["IO"] == "input"
    assert checked > 100, checked

def test_graph_break_and_recompilation_are_graphs_with_eager_code_between(runs):
    rank = runs("break")["rank"]
    ids = graphs(rank)
    forwards = {g: graph_order(rank, g) for g in ids[1:]
                if graph_order(rank, g)[0].startswith("Default/")}
    first = [g for g, order in forwards.items() if order[0].startswith("Default/first-Linear/")]
    second = [g for g, order in forwards.items() if order[0].startswith("Default/second-Linear/")]
    assert first and second, forwards
    # Iteration 0: the first half's graph, the eager .item() between, then the second half's.
    def stamps(graph, iteration):
        return [int(row["Timestamp"]) for row in rows(rank, graph, iteration)]
    g1 = next(g for g in first if os.path.isdir(rank / "Net" / str(g) / "0"))
    g2 = next(g for g in second if os.path.isdir(rank / "Net" / str(g) / "0"))
    item = [row for row in rows(rank, 0, 0) if row["Op Type"] == "item"]
    assert len(item) >= 1
    assert max(stamps(g1, 0)) < int(item[0]["Timestamp"]) < min(stamps(g2, 0))
    # Step 3's longer sequence is a new compilation of the first half: a graph of its own, run
    # in iteration 2 only, over 4 x 9 tokens.
    recompiled = [g for g in first if sorted(os.listdir(rank / "Net" / str(g))) == ["2"]]
    assert len(recompiled) == 1 and recompiled[0] != g1, (first, g1)
    shapes = {row["Shape"] for row in rows(rank, recompiled[0], 2) if row["IO"] == "input"}
    assert "(36,16)" in shapes, shapes


def test_a_dump_started_after_torch_compile_dumps_the_compiled_graphs(runs, tmp_path):
    """The explicit API, the Dump started after the script called torch.compile: the compiled
    model's first call, under the Dump, compiles it, instrumented (before, the eager capture saw
    the compilation's operators on fake tensors and Dynamo failed)."""
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "statistic"})
    run = python(SCRIPT, "block", tmp_path / "out.npz", "--dump", config,
                 env={"PYTHONPATH": os.path.join(BUILD_DIR, "python")})
    assert run.returncode == 0, run.stderr[-3000:]
    plain, dumped = runs("block")["plain"], np.load(tmp_path / "out.npz")
    assert sorted(dumped.files) == sorted(plain.files)
    for key in plain.files:
        assert np.array_equal(plain[key], dumped[key]), key
    rank = tmp_path / "dump" / "rank_0"
    assert graphs(rank) == [0, 1, 2]
    forward = graph_order(rank, 1)
    assert [k for k in forward if re.fullmatch(r"Default/up-Linear/addmm-op\d+", k)], forward
    assert [k for k in forward if "/FusionOp_" in k], forward
    assert all(k.startswith("Gradients/Default/") for k in graph_order(rank, 2))
    assert global_order(rank, 1) == [0, 1, 2]
    assert {r["Op Name"] for r in rows(rank, 1, 2)} >= {
        re.sub(r"[/\\. ]", "_", k) for k in forward}


def test_set_dump_of_a_compiled_models_submodule_selects_its_compiled_kernels(runs, tmp_path):
    """dump_mode 2, Dump.set_dump(model.up) of the model that was compiled: the compiled forward
    and backward kernels of `up` (their module path is relative to the compiled model) and its
    parameters' gradient accumulation and update kernels, nothing else."""
    config = write_config(tmp_path / "d.json", tmp_path / "dump",
                          {"saved_data": "statistic", "dump_mode": 2})
    run = python(SCRIPT, "block", tmp_path / "out.npz", "--dump", config, "--set-dump", "up",
                 env={"PYTHONPATH": os.path.join(BUILD_DIR, "python")})
    assert run.returncode == 0, run.stderr[-3000:]
    plain, dumped = runs("block")["plain"], np.load(tmp_path / "out.npz")
    for key in plain.files:
        assert np.array_equal(plain[key], dumped[key]), key
    rank = tmp_path / "dump" / "rank_0"

    def dumped_kernels(graph):
        return {r["Op Name"] for r in rows(rank, graph, 1) if r["Op Type"] != "Parameter"}

    under = {g: {re.sub(r"[/\\. ]", "_", k) for k in graph_order(rank, g)
                 if k.startswith(("Default/up-Linear/", "Gradients/Default/up-Linear/"))}
             for g in (1, 2)}
    assert under[1] and under[2], under
    assert dumped_kernels(1) == under[1]
    assert dumped_kernels(2) == under[2]
    eager = dumped_kernels(0)
    assert eager and all("_orig_mod_up_" in k for k in eager), eager


def test_a_nan_made_inside_a_fused_kernel_is_named_by_watch_and_hunt(tmp_path):
    gate = script_line("gate")
    config = write_config(tmp_path / "stat.json", tmp_path / "dump", {"saved_data": "statistic"})
    graphdump("python", "--config", config, SCRIPT, "nan", tmp_path / "out.npz", check=0)
    watch = graphdump("watch", "--first", tmp_path / "dump", check=1)
    first = re.search(r"first hit: (\S+) \(rank 0, graph (\d+), iteration 2, output 0\) at "
                      r"(\S+):(\d+)", watch.stdout)
    assert first, watch.stdout
    kernel, graph = first.group(1), first.group(2)
    assert re.fullmatch(r"Default/FusionOp_log_mul_add-op\d+", kernel), kernel
    assert first.group(3) == SCRIPT and int(first.group(4)) in (gate, gate + 1)
    # The .ir says which operators the kernel fused, the log on the gate's line among them.
    ir = (tmp_path / "dump" / "rank_0" / "graphs" / f"ms_output_trace_code_graph_{graph}.ir")
    block = ir.read_text().split(f"(Default/{kernel.split('/', 1)[1]})")[0].rsplit("\n  %", 1)[1]
    assert f"aten.log.default (compiled_train.py:{gate})" in block, block
    hunt = graphdump("hunt", "--dump-path", tmp_path / "hunt", SCRIPT, "nan",
                     tmp_path / "hunted.npz", timeout=600, check=1)
    assert "nan at iteration 2 (rank 0, graph" in hunt.stdout, hunt.stdout
    assert f"kernel: {kernel} (output 0)" in hunt.stdout, hunt.stdout
    assert f"created: {kernel} created them" in hunt.stdout, hunt.stdout
    assert f"line: {SCRIPT}:" in hunt.stdout and "first at [1, 2, 0]" in hunt.stdout


def test_configuration_selects_compiled_kernels_by_name_and_iteration(tmp_path):
    config = write_config(tmp_path / "some.json", tmp_path / "dump",
                          {"dump_mode": 1, "saved_data": "tensor", "iteration": "1",
                           "kernels": ["name-regex(.*/FusionOp_[a-z_]*erf[a-z_]*-op\\d+)"]})
    graphdump("python", "--config", config, SCRIPT, "block", tmp_path / "out.npz", check=0)
    plain = python(SCRIPT, "block", tmp_path / "plain.npz", check=0)
    a, b = np.load(tmp_path / "out.npz"), np.load(tmp_path / "plain.npz")
    assert all(np.array_equal(a[k], b[k]) for k in b.files) and "losses" in b.files
    rank = tmp_path / "dump" / "rank_0"
    files = sorted(os.path.relpath(f, rank) for f in glob.glob(str(rank / "Net" / "*" / "*" /
                                                                     "*.npy")))
    # One forward GELU kernel (its input and output) and the backward kernels whose forward
    # operators include the erf, in iteration 1 only; beside them the parameters as that
    # iteration began.
    assert any(f.startswith("Net/0/1/Parameter.") for f in files), files
    files = [f for f in files if not f.startswith("Net/0/1/Parameter.")]
    assert files, files
    assert all(re.match(r"Net/[12]/1/FusionOp_[a-z_]*erf", f) for f in files), files
    assert [f for f in files if f.startswith("Net/1/1/")] and len(
        [f for f in files if f.startswith("Net/1/1/") and ".input." in f]) == 1, files


def test_a_call_that_raises_ends_its_step(runs):
    """Step 2's compiled forward raises (a token out of the vocabulary) and the script skips
    the batch: that call is a step of its own, as are the calls after it, and the eager
    capture goes on (the loss of the next batch is a kernel)."""
    r = runs("raise")
    assert "step 1 skipped: RuntimeError" in r["run"].stdout, r["run"].stdout
    rank = r["rank"]
    assert graphs(rank) == [0, 1, 2]
    forward = graph_order(rank, 1)
    assert forward and all(k.startswith("Default/") for k in forward), forward
    # The forward ran in iterations 0, 1 (the call that raised, then the next batch's) and 2;
    # the backward once per iteration.
    assert global_order(rank, 1) == [0, 1, 1, 2]
    assert global_order(rank, 2) == [0, 1, 2]
    # Every forward kernel of the next batch's call was dumped in iteration 1, the last one's
    # output giving that step's loss.
    last = forward[-1]
    outputs = [row for row in rows(rank, 1, 1)
               if row["Op Name"] == re.sub(r"[/\\. ]", "_", last) and row["IO"] == "output"]
    assert len(outputs) == 1, outputs
    out = tensor(rank, 1, 1, last, "output", 0).astype(np.float64)
    assert np.isclose((out ** 2).mean(), r["plain"]["losses"][1], rtol=1e-5)
    assert [row for row in rows(rank, 0, 1) if row["Op Type"] == "pow"], rows(rank, 0, 1)


def test_operator_mode_dumps_every_aten_operator(runs, tmp_path):
    """GRAPHDUMP_COMPILE_MODE=operators: AOTAutograd's forward and backward graphs run operator
    by operator, each ATen operator a kernel (no fusion), at eager numerics."""
    config = write_config(tmp_path / "ops.json", tmp_path / "dump", {"iteration": "0"})
    graphdump("python", "--config", config, SCRIPT, "block", tmp_path / "ops.npz",
              env={"GRAPHDUMP_COMPILE_MODE": "operators"}, check=0)
    rank = tmp_path / "dump" / "rank_0"
    assert graphs(rank) == [0, 1, 2]
    forward, backward = graph_order(rank, 1), graph_order(rank, 2)
    assert not [k for k in forward + backward if "FusionOp_" in k], forward
    assert [k for k in forward if re.fullmatch(r"Default/gelu-op\d+", k)], forward
    assert all(k.startswith("Gradients/Default/") for k in backward), backward
    assert [k for k in backward if re.fullmatch(r"Gradients/Default/down-Linear/mm-op\d+", k)]
    addmm = next(k for k in forward if re.fullmatch(r"Default/qkv-Linear/addmm-op\d+", k))
    bias, x, w = (tensor(rank, 1, 0, addmm, "input", i).astype(np.float64) for i in range(3))
    np.testing.assert_allclose(tensor(rank, 1, 0, addmm, "output", 0), bias + x @ w,
                               rtol=1e-4, atol=1e-5)
    # Eager numerics: the losses are the compiled run's within float32 rounding, not bit for bit.
    losses = np.load(tmp_path / "ops.npz")["losses"]
    np.testing.assert_allclose(losses, runs("block")["plain"]["losses"], rtol=1e-5)


def test_a_buffer_updated_in_place_is_dumped_as_each_kernel_read_it(tmp_path):
    """A module's buffer that its compiled forward updates in place (a running statistic,
    compiled_buffer_update.py): the generated kernel reads it through one pointer and writes it
    through another. Its input file is the buffer before the update, its output the buffer
    after; a statistic dump, whose kernels find again what the call read or wrote, has the full
    dump's rows."""
    script = os.path.join(HERE, "compiled_buffer_update.py")
    plain = tmp_path / "plain.npz"
    python(script, plain, check=0)
    full_config = write_config(tmp_path / "full.json", tmp_path / "full", {"saved_data": "full"})
    graphdump("python", "--config", full_config, script, tmp_path / "full.npz", check=0)
    for name in ("outs", "running"):
        np.testing.assert_array_equal(np.load(tmp_path / "full.npz")[name], np.load(plain)[name])
    full = tmp_path / "full" / "rank_0"
    update = next(k for k in graph_order(full, 1) if "copy_" in k)
    running = np.ones(16, np.float32)
    for it in range(3):
        row = next(r for r in rows(full, 1, it)
                   if r["Op Name"] == re.sub(r"[/\\. ]", "_", update) and r["IO"] == "input"
                   and r["Shape"] == "(16)")
        np.testing.assert_array_equal(tensor(full, 1, it, update, "input", row["Slot"]), running)
        written = [tensor(full, 1, it, update, "output", r["Slot"]) for r in rows(full, 1, it)
                   if r["Op Name"] == row["Op Name"] and r["IO"] == "output"
                   and r["Shape"] == "(16)"]
        assert not any(np.array_equal(w, running) for w in written), it
        running = written[-1]
    np.testing.assert_array_equal(running, np.load(plain)["running"])

    stat_config = write_config(tmp_path / "stat.json", tmp_path / "stat",
                               {"saved_data": "statistic"})
    graphdump("python", "--config", stat_config, script, tmp_path / "stat.npz", check=0,
              env={"GRAPHDUMP_TEST_STATISTICS_DELAY_US": "2000",
                   "GRAPHDUMP_STATISTICS_THREAD": "1"})
    for it in range(3):
        got, want = rows(tmp_path / "stat" / "rank_0", 1, it), rows(full, 1, it)
        assert [{k: v for k, v in r.items() if k != "Timestamp"} for r in got] == \
            [{k: v for k, v in r.items() if k != "Timestamp"} for r in want], it
