"""Comments, docs, tests and messages cite docs/ and code only: no file of the repository refers
to the developers' SPEC or DESIGN notes or to issue numbers, which a contributor does not have."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("GRAPHDUMP_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
THIS_FILE = "tests/e2e/test_source_references.py"

# What a reference to something outside the repository looks like.
FORBIDDEN = re.compile(
    r"\bSPEC\b|SPEC\.md|DESIGN\.md|\bDESIGN \"|§"
    r"|\b[Ii]ssues? ?#?\d+\b"          # issue 22, issue #22, issues 4
    r"|(?:\bPR|\bsee|\() ?#\d+\b")      # PR #22, see #22, (#22)


def repository_files():
    """The tracked files (every file under SOURCE_DIR outside build trees when git is absent)."""
    try:
        listed = subprocess.run(["git", "-C", SOURCE_DIR, "ls-files", "-z"], capture_output=True,
                                check=True).stdout.decode().split("\0")
        files = [f for f in listed if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(SOURCE_DIR):
            dirs[:] = [d for d in dirs if not d.startswith((".git", "build"))]
            files += [os.path.relpath(os.path.join(root, n), SOURCE_DIR) for n in names]
    # The fuzz corpus is data (random bytes may spell anything).
    return [f for f in files if f != THIS_FILE and not f.startswith("tests/fuzz/corpus/")]


def references(text):
    return [m.group(0) for m in FORBIDDEN.finditer(text)]


def test_pattern_catches_each_kind_of_reference():
    assert references("(SPEC §5)") == ["SPEC", "§"]
    assert references("see DESIGN.md") == ["DESIGN.md"]
    assert references('(issue 4 / DESIGN "Compare")') == ["issue 4", 'DESIGN "']
    assert references("fixed in issue #22; see #7") == ["issue #22", "see #7"]
    # Report markers and rank lines of the docs are not references.
    assert references("#1 adds error x256; it 1 #4 Default/fc2-Dense/BiasAdd-op4") == []
    assert references("CheckSpec* spec; by design; an issue with the disk") == []


def test_no_file_cites_spec_design_or_issue_numbers():
    files = repository_files()
    assert len(files) > 100, f"found only {len(files)} files under {SOURCE_DIR}"
    found = []
    for name in files:
        path = os.path.join(SOURCE_DIR, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data:
            continue  # binary
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            for hit in references(line):
                found.append(f"{name}:{number}: {hit!r} in: {line.strip()}")
    assert not found, ("cite docs/ or code instead of the developers' notes or issue numbers "
                       "(where a format fact is needed, state it in docs/):\n" + "\n".join(found))


if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
