"""Nothing outside the dump is written (docs/reliability.md): the files the hunt and a precision
run write from Python (answer.json and report.html, a pass's stop marker, a precision run's
output_N.npy and run.json) go to a new temporary name created with O_EXCL|O_NOFOLLOW, then are
renamed: a symbolic link planted at the temporary name (or at the final name) is never written
through, and the planted link's target keeps its bytes."""
import importlib
import json
import os

import numpy as np

import conftest  # noqa: F401  (puts the build's package on sys.path)
from graphdump import _hunt_child, precision

hunt = importlib.import_module("graphdump.hunt")  # the module (graphdump.hunt is the function)


def _plant(tmp_path, final):
    """Links at `final`'s temporary names (this process's, and `.tmp`) and one at `final`
    itself, each to a file outside holding 'outside'; returns the targets."""
    targets = []
    for name, link in (("target_tmp", f"{final}.tmp{os.getpid()}"),
                       ("target_tmp_plain", f"{final}.tmp"), ("target", final)):
        target = tmp_path / name
        target.write_text("outside")
        os.symlink(target, link)
        targets.append(target)
    return targets


def _untouched(targets):
    for target in targets:
        assert target.read_bytes() == b"outside", f"{target} was written through a link"


def test_hunt_answer_not_written_through_links(tmp_path):
    final = str(tmp_path / "answer.json")
    targets = _plant(tmp_path, final)
    hunt._write_whole(final, '{"status": "hit"}\n')
    _untouched(targets)
    assert not os.path.islink(final), "the final name is a file of its own now"
    with open(final, encoding="utf-8") as f:
        assert json.load(f) == {"status": "hit"}
    assert os.path.islink(f"{final}.tmp{os.getpid()}"), "the planted link is left alone"
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n and not
                os.path.islink(tmp_path / n)], "no temporary of ours is left"


def test_stop_marker_not_written_through_links(tmp_path):
    final = str(tmp_path / "rank_0.stop")
    targets = _plant(tmp_path, final)
    _hunt_child._write_stop(str(tmp_path), 0, 3)
    _untouched(targets)
    with open(final, encoding="utf-8") as f:
        assert json.load(f) == {"iteration": 3, "rank": 0}


def test_precision_outputs_not_written_through_links(tmp_path):
    final = str(tmp_path / "output_0.npy")
    targets = _plant(tmp_path, final)
    precision._save_whole(final, lambda f: np.save(f, np.arange(4, dtype=np.float32)))
    _untouched(targets)
    assert np.array_equal(np.load(final), np.arange(4, dtype=np.float32))
