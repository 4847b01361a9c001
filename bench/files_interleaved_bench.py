#!/usr/bin/env python3
"""What the files of a tensor dump cost the file system when other work runs between them, as a
training's kernels run between a synchronous dump's files, against the same files written back
to back: the ceiling of eager_bench's `eager_tensor_dump_vs_files_alone` for any writer whose
writes alternate with the training's work.

The dump is that of eager_bench's tensor run (bench/lib/eager_lm_training.py under `graphdump
python`, every kernel of iteration 2). Per round, in alternating order, a plain program
(benchutil.write_same_files) writes its .npy files, hard links and directories into a new
directory:
  1. back to back, as eager_bench's files-alone run does;
  2. with 16 MiB of other memory touched before each file (one write per 64-byte line: what a
     kernel's tensors do to the CPU's caches and TLB between two of the dump's files), that
     touch's own time not counted.
Printed, as the median over BENCH_ROUNDS rounds:
  bench: files_back_to_back_vs_interleaved ratio=X (run 1's time over run 2's; a writer between
                                                    kernels reaches at most about this fraction
                                                    of the back-to-back floor)

Environment: GRAPHDUMP_BIN (the CLI), BENCH_ROUNDS (default 5), BENCH_MODEL ("LAYERS WIDTH SEQ
BATCH", default "2 128 64 8"), BENCH_DIR (where to write: the file system measured; default a
temporary directory).
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

TENSOR_STEP = 2
TOUCHED_MIB = 16
LINE_BYTES = 64


def main():
    rounds = benchutil.rounds(5)
    model = os.environ.get("BENCH_MODEL", benchutil.EAGER_LM_MODEL).split()
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_files_bench_")
    os.makedirs(work, exist_ok=True)
    dump = os.path.join(work, "dump")
    config = benchutil.write_dump_config(os.path.join(work, "config.json"), dump, "tensor",
                                         str(TENSOR_STEP))
    benchutil.run_graphdump("files_interleaved_bench",
                            [benchutil.BIN, "python", "--config", config, benchutil.EAGER_LM,
                             str(TENSOR_STEP + 1), *model], work)
    step = benchutil.iteration_dir("files_interleaved_bench", dump, TENSOR_STEP)
    other = bytearray(TOUCHED_MIB << 20)

    def touch():
        other[::LINE_BYTES] = bytes(len(other) // LINE_BYTES)

    times = {"back_to_back": [], "interleaved": []}
    for r in range(rounds):
        for side in benchutil.alternate(r, list(times)):
            into = os.path.join(work, f"{side}{r}")
            times[side].append(benchutil.write_same_files(
                step, into, between=touch if side == "interleaved" else None))
        print(f"round {r + 1}: back to back {times['back_to_back'][-1] * 1e3:.1f} ms, "
              f"interleaved {times['interleaved'][-1] * 1e3:.1f} ms", flush=True)
    benchutil.remove_tree(work)
    ratios = [a / b for a, b in zip(times["back_to_back"], times["interleaved"])]
    print(f"bench: files_back_to_back_vs_interleaved ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
