#!/usr/bin/env python3
"""What a tensor dump of an optimizer's update costs in memory: AdamW updates each parameter and
its two state tensors in place, and the dump saves them as they were before the update (the
update kernel's inputs) and after it (its outputs).

Per round, in alternating order, bench/lib/adam_mlp_training.py (an MLP of 3 layers 4096 wide,
AdamW, 2 steps) runs under plain `python`, under `graphdump python` with a configuration that
dumps nothing (an iteration the run never reaches), with a tensor dump of every kernel of its
last step, and with the same dump written by background threads (e2e_dump_settings.enable
false, whose queued copies are bounded at 256 MiB); each reports its peak resident memory (a
model this large, because the allocator's choices move a small model's peak by tens of MiB from
run to run). Each dump (1.6 GiB with the default model) is removed after its run. Printed, as the median over BENCH_ROUNDS rounds
(default 3):
  bench: optimizer_tensor_dump_peak_rss_vs_plain ratio=X   (the dumped run's peak over the
                                                             plain run's)
  bench: optimizer_tensor_dump_added_over_state ratio=Y    (the dumped run's peak less the
                                                             nothing-dumped run's, over the
                                                             bytes of AdamW's state: 1 is a
                                                             copy of the state)
  bench: optimizer_async_dump_added_over_state ratio=Z     (the same for the asynchronous dump:
                                                             its queue's bound at most)

Environment: GRAPHDUMP_BIN (the CLI), BENCH_ROUNDS, BENCH_MODEL ("LAYERS WIDTH", default
"3 4096"), BENCH_DIR (where the dump goes; default a temporary directory).
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import benchutil  # noqa: E402

SCRIPT = os.path.join(benchutil.LIB, "adam_mlp_training.py")
STEPS = 2


def main():
    rounds = benchutil.rounds()
    model = os.environ.get("BENCH_MODEL", "3 4096").split()
    work = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="graphdump_optimizer_bench_")
    os.makedirs(work, exist_ok=True)
    # The dumped iteration: the last step's, or one the run never reaches.
    iterations = {"plain": None, "off": STEPS + 1000, "dumped": STEPS - 1,
                  "asynchronous": STEPS - 1}
    peaks = {side: [] for side in iterations}
    state_mib = 0.0
    for r in range(rounds):
        for side in benchutil.alternate(r, list(peaks)):
            command = [sys.executable, SCRIPT, str(STEPS), *model]
            dump = os.path.join(work, f"{side}{r}")
            if iterations[side] is not None:
                config = benchutil.write_dump_config(dump + ".json", dump, "tensor",
                                                     str(iterations[side]),
                                                     asynchronous=side == "asynchronous")
                command = [benchutil.BIN, "python", "--config", config, *command[1:]]
            p, _ = benchutil.run_graphdump("optimizer_memory_bench", command, work)
            benchutil.remove_tree(dump)
            result = benchutil.printed(p)
            peaks[side].append(result["peak_rss_mib"])
            state_mib = 2 * result["parameters_mib"]  # AdamW's exp_avg and exp_avg_sq
        print(f"round {r + 1}: peak plain {peaks['plain'][-1]:.0f} MiB, nothing dumped "
              f"{peaks['off'][-1]:.0f} MiB, dumped {peaks['dumped'][-1]:.0f} MiB, "
              f"asynchronously {peaks['asynchronous'][-1]:.0f} MiB (AdamW's state "
              f"{state_mib:.0f} MiB)", flush=True)
    benchutil.remove_tree(work)
    ratios = [d / p for d, p in zip(peaks["dumped"], peaks["plain"])]

    def added(side):  # over the nothing-dumped run, in AdamW states
        return statistics.median((d - o) / state_mib for d, o in zip(peaks[side], peaks["off"]))

    print(f"bench: optimizer_tensor_dump_peak_rss_vs_plain ratio={statistics.median(ratios):.3f}")
    print(f"bench: optimizer_tensor_dump_added_over_state ratio={added('dumped'):.3f}")
    print(f"bench: optimizer_async_dump_added_over_state ratio={added('asynchronous'):.3f}")


if __name__ == "__main__":
    main()
