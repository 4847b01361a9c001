"""The statistic catalogue and the table of watch checks are what every consumer reads: a dump of
every catalogue category is written, loaded and watched with no title spelled here, every watch
check of the table is parsed, listed by --help and by the Python docstring, and documented."""
import csv
import glob
import os

import pytest

import graphdump
from graphdump import _graphdump
from conftest import SOURCE_DIR, write_config
from conftest import graphdump as cli

CATALOGUE = _graphdump.statistic_catalogue()  # (name, title, comparable), in column order
CHECKS = _graphdump.watch_checks()  # (name, takes a threshold, default threshold)


def spelled(check):
    name, has_threshold, _ = check
    return name + ("[:T]" if has_threshold else "")


@pytest.fixture(scope="module")
def stat_dump(tmp_path_factory):
    """A statistic-only dump of every category, in the reverse of the catalogue's order, with a
    NaN planted in kernel 1's output of iteration 1."""
    tmp = tmp_path_factory.mktemp("catalogue")
    names = [name for name, _, _ in reversed(CATALOGUE)]
    config = write_config(tmp / "cfg.json", tmp / "dump",
                          {"saved_data": "statistic", "statistic_category": names})
    cli("demo-synthetic", "--config", config, "--steps", "2", "--nan-kernel", "1",
        "--fault-iteration", "1", check=0)
    return tmp / "dump"


def test_the_catalogue_has_unique_names_and_titles():
    assert len(CATALOGUE) >= 12
    assert len({name for name, _, _ in CATALOGUE}) == len(CATALOGUE)
    assert len({title for _, title, _ in CATALOGUE}) == len(CATALOGUE)


def test_statistic_csv_and_load_keep_the_configured_order(stat_dump):
    titles = [title for _, title, _ in reversed(CATALOGUE)]
    files = glob.glob(os.path.join(str(stat_dump), "**", "statistic.csv"), recursive=True)
    assert files
    for path in files:
        with open(path, newline="") as f:
            header = next(csv.reader(f))
        assert header[10:] == titles, path
    frame = graphdump.load(stat_dump)
    assert len(frame) > 0
    assert [c for c in frame.columns if c in set(titles)] == titles


def test_watch_reads_the_counts_of_a_statistic_row(stat_dump):
    hits = graphdump.watch(stat_dump, "nan")
    assert len(hits) > 0
    # Counted from the NaN Count column (without it: "max and min are NaN: at least one").
    detail = hits["detail"].iloc[0]
    assert detail.endswith(" elements") and " NaN of " in detail, detail
    assert "at least one" not in detail


def test_every_statistic_is_documented():
    with open(os.path.join(SOURCE_DIR, "docs", "file-format.md")) as f:
        rows = [line for line in f if line.startswith("| `")]
    with open(os.path.join(SOURCE_DIR, "docs", "configuration.md")) as f:
        configuration = f.read()
    for name, title, _ in CATALOGUE:
        assert any(f"`{name}`" in row and title in row for row in rows), name
        assert f"`{name}`" in configuration, name


def test_every_watch_check_is_parsed_listed_and_documented(stat_dump):
    help_text = " ".join(cli("watch", "--help", check=0).stdout.split())
    with open(os.path.join(SOURCE_DIR, "docs", "analysis.md")) as f:
        docs = f.read()
    doc = " ".join(graphdump.watch.__doc__.split())
    for check in CHECKS:
        name, has_threshold, default = check
        assert spelled(check) in help_text, name
        assert spelled(check) in doc, name
        assert f"| `{spelled(check)}` |" in docs, name
        # Exit 3: no hit, and the check had nothing in this dump to judge (it says what it
        # needs); never an all-clear.
        p = cli("watch", stat_dump, "--check", name, "--json", "-q")
        assert p.returncode in (0, 1) or (p.returncode == 3 and
                                          "judged nothing" in p.stderr), \
            f"{name}: {p.stderr}"
        p = cli("watch", stat_dump, "--check", f"{name}:5", "-q")
        if has_threshold:
            assert p.returncode in (0, 1) or (p.returncode == 3 and
                                              "judged nothing" in p.stderr), \
                f"{name}: {p.stderr}"
        else:
            assert p.returncode == 2 and f"{name} takes no threshold" in p.stderr, p.stderr
    p = cli("watch", stat_dump, "--check", "no-such-check", "-q", check=2)
    assert "unknown watchpoint 'no-such-check'" in p.stderr
    for check in CHECKS:
        assert spelled(check) in p.stderr
