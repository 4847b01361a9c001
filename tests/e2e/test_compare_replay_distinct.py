"""compare --replay N replays N distinct kernels: a kernel that adds error in every iteration is
replayed once (with its iteration and call), not once per iteration. graphdump-torch is a fake
that prints what it was asked as a replay result."""
import json
import os
import shutil
import subprocess

import analysis_dumps as d
import gdtest as t


def test_replay_counts_distinct_kernels(scratch):
    ref = d.simple_net(n=4)
    bad = [dict(k) for k in ref]
    bad[1] = dict(ref[1], outputs=[ref[1]['outputs'][0] * 3.0])   # adds the most, every iteration
    bad[3] = dict(ref[3], outputs=[ref[3]['outputs'][0] * 1.5])   # adds less
    a, b = os.path.join(scratch, "a"), os.path.join(scratch, "b")
    d.write_dump(a, {0: bad, 1: bad, 2: bad})
    d.write_dump(b, {0: ref, 1: ref, 2: ref})

    fake = os.path.join(scratch, "fake_bin")
    os.makedirs(fake)
    shutil.copy(t.BIN, os.path.join(fake, "graphdump"))
    with open(os.path.join(fake, "graphdump-torch"), "w") as f:
        f.write("#!/bin/sh\n"
                "printf '{\"verdict\": \"accurate\", \"reason\": \"accurate: %s\"}\\n' \"$*\"\n")
    os.chmod(os.path.join(fake, "graphdump-torch"), 0o755)
    p = subprocess.run([os.path.join(fake, "graphdump"), "compare", a, b, "-q", "--json",
                        "--replay", "2"], capture_output=True, text=True)
    assert p.returncode == 1, f"kernels add error: {p.stderr}"
    result = json.loads(p.stdout)
    kernels = [r["kernel"] for r in result["replays"]]
    assert kernels == [ref[1]["full_name"], ref[3]["full_name"]], \
        "two distinct kernels replayed, the largest contribution first"
    first = result["replays"][0]
    assert f"--iteration {first['iteration']} --call 0 " in first["replay"]["reason"], \
        f"the replay names the iteration and call of the contribution: {first}"
    assert ("replaying 1/2" in p.stderr and "replaying 2/2" in p.stderr and
            "replaying 3/" not in p.stderr), f"progress: {p.stderr}"
    ranks = [r["contributor"] for r in result["replays"]]
    assert ranks == [1, 4], "each replay names its place in the ranking (3 iterations each)"
