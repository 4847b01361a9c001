"""Two ranks of a user's DistributedDataParallel script (user_ddp.py: gloo, a TorchScript model
in DDP) under graphdump python, started torchrun-style: per-rank dumps, parameters equal across
ranks and equal to the same script's without graphdump after every step, and the gradient
all-reduce dumped as kernels."""
import csv
import glob
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from conftest import (BIN, HERE, clean_env, every_npy_loads, execution_order, global_order,
                      graphdump, write_config)

STEPS = 3
PARAMETERS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def saved(prefix, rank):
    return np.load(f"{prefix}.rank{rank}.npz")


def start_ranks(command, port):
    """Starts `command` (argv without the interpreter or CLI) as ranks 0 and 1, as torchrun
    would; returns the two processes."""
    processes = []
    for rank in (0, 1):
        env = clean_env({"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        processes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    return processes


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The parameters after every step of user_ddp.py run by the environment's Python without
    graphdump (torch's own DDP reduction): what a dumped run must train to. Equal ranks alone
    would not catch a reduction that is off by a constant factor (DDP divides by the world size
    while copying into its bucket only when no communication hook is registered, and graphdump
    registers one)."""
    prefix = tmp_path_factory.mktemp("plain") / "out"
    processes = start_ranks([sys.executable, os.path.join(HERE, "user_ddp.py"), str(prefix)],
                            free_port())
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    return saved(prefix, 0)


def assert_trains_as_plain(ranks, plain):
    assert sorted(ranks[0].files) == sorted(plain.files)
    for key in plain.files:  # every parameter after every step
        np.testing.assert_allclose(ranks[0][key], plain[key], rtol=1e-6, atol=1e-7,
                                   err_msg=f"{key}: the dumped run trains as plain DDP")


def test_two_ranks_with_nproc(tmp_path, plain):
    config = write_config(tmp_path / "d.json", tmp_path / "dump")
    run = graphdump("python", "--config", config, "--nproc", 2,
                    os.path.join(HERE, "user_ddp.py"), tmp_path / "out", check=0)
    assert "[rank 0] rank 0/2: 3 steps" in run.stdout and "[rank 1] rank 1/2" in run.stdout
    ranks = [saved(tmp_path / "out", r) for r in (0, 1)]
    for key in ranks[0].files:  # every parameter after every step
        assert np.array_equal(ranks[0][key], ranks[1][key]), key
    assert_trains_as_plain(ranks, plain)
    for rank in (0, 1):
        root = tmp_path / "dump" / f"rank_{rank}"
        assert global_order(root) == list(range(STEPS))
        assert every_npy_loads(root) > 100
    # Each all-reduce kernel's output is the mean of the ranks' local gradients (its inputs),
    # and what SGD used: the parameter after = before - lr * (momentum buffer).
    for it in range(STEPS):
        for name in PARAMETERS:
            kernel = f"AllReduce.Default_allreduce-DataParallel_{name.replace('.', '_')}_AllReduce"
            local = [np.load(glob.glob(f"{tmp_path}/dump/rank_{r}/Net/0/{it}/{kernel}-op*"
                                       ".input.0.*.npy")[0]) for r in (0, 1)]
            reduced = [np.load(glob.glob(f"{tmp_path}/dump/rank_{r}/Net/0/{it}/{kernel}-op*"
                                         ".output.0.*.npy")[0]) for r in (0, 1)]
            assert not np.array_equal(local[0], local[1])  # different shards
            assert np.array_equal(reduced[0], reduced[1])
            np.testing.assert_allclose(reduced[0], (local[0] + local[1]) / 2, rtol=1e-6,
                                       atol=1e-7)
            grad_in = np.load(glob.glob(f"{tmp_path}/dump/rank_0/Net/0/{it}/SGD.*_"
                                        f"{name.replace('.', '_')}_SGD-op*.input.1.*.npy")[0])
            assert np.array_equal(grad_in, reduced[0])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_support_device_and_own_hook_with_ranks_started_by_hand(tmp_path, plain):
    # The ranks a launcher starts, here by hand with torchrun's variables; only rank 1 dumps,
    # and the ranks still train alike (rank 0 runs through the executor without dumping). The
    # script registers its own communication hook: it does the reduction, and is dumped.
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"support_device": [1]})
    processes = start_ranks([BIN, "python", "--config", config, os.path.join(HERE, "user_ddp.py"),
                             str(tmp_path / "out"), "--hook"], free_port())
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    assert "dump: off (rank 0 is not in support_device [1]" in outputs[0][1]
    assert sorted(os.listdir(tmp_path / "dump")) == ["rank_1"]
    ranks = [saved(tmp_path / "out", r) for r in (0, 1)]
    for key in ranks[0].files:
        assert np.array_equal(ranks[0][key], ranks[1][key]), key
    assert_trains_as_plain(ranks, plain)  # allreduce_hook divides by the world size itself
    for it in range(STEPS):
        files = os.listdir(tmp_path / "dump" / "rank_1" / "Net" / "0" / str(it))
        assert sum(f.startswith("AllReduce.") and ".output.0." in f for f in files) == 4


def test_compiled_ddp_with_nproc(tmp_path):
    """torch.compile(DDP(model)) on two ranks: each rank's dump has the compiled forward and
    backward graphs (graphs 1 and 2) in every iteration, the gradients' all-reduce as kernels of
    graph 0, and the ranks train bit for bit as the plain compiled run."""
    script = os.path.join(HERE, "user_ddp.py")
    processes = start_ranks([sys.executable, script, str(tmp_path / "plain"), "--eager",
                             "--compile"], free_port())
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    plain = saved(tmp_path / "plain", 0)
    config = write_config(tmp_path / "d.json", tmp_path / "dump", {"saved_data": "statistic"})
    run = graphdump("python", "--config", config, "--nproc", 2, script, tmp_path / "out",
                    "--eager", "--compile", timeout=600, check=0)
    assert "[rank 1] rank 1/2: 3 steps" in run.stdout, run.stdout
    ranks = [saved(tmp_path / "out", r) for r in (0, 1)]
    assert sorted(ranks[0].files) == sorted(plain.files)
    for key in plain.files:
        assert np.array_equal(ranks[0][key], plain[key]), key
        assert np.array_equal(ranks[1][key], plain[key]), key
    for rank in (0, 1):
        root = tmp_path / "dump" / f"rank_{rank}"
        assert [k.rsplit("-op", 1)[0] for k in execution_order(root, 1)] == [
            "Default/fc1-Linear/addmm", "Default/relu", "Default/fc2-Linear/addmm"]
        assert "Gradients/Default/fc1-Linear/mm" in {
            k.rsplit("-op", 1)[0] for k in execution_order(root, 2)}
        assert global_order(root, 1) == global_order(root, 2) == list(range(STEPS))
        reduced = [k for k in execution_order(root) if k.endswith("_AllReduce") or
                   "/AllReduce-op" in k]
        assert len(reduced) == len(PARAMETERS), reduced
        for it in range(STEPS):
            for graph in (1, 2):
                assert (root / "Net" / str(graph) / str(it) / "statistic.csv").stat().st_size
    # The all-reduce's outputs (the mean gradient) have the same statistics on both ranks.
    for it in range(STEPS):
        outputs = []
        for rank in (0, 1):
            with open(tmp_path / "dump" / f"rank_{rank}" / "Net" / "0" / str(it) /
                      "statistic.csv", newline="") as f:
                outputs.append(sorted((r["Op Name"].rsplit("-op", 1)[0], r["Max Value"],
                                       r["Min Value"]) for r in csv.DictReader(f)
                                      if r["Op Type"] == "AllReduce" and r["IO"] == "output"))
        assert len(outputs[0]) == len(PARAMETERS) and outputs[0] == outputs[1], outputs
