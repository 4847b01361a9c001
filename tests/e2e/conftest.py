"""pytest settings of the end-to-end tests (ctest runs each test_*.py with
`python3 -m pytest -q -p no:cacheprovider FILE`; see tests/CMakeLists.txt).

A test is a plain `def test_...()` function; shared setup that is expensive (a model trained
once, a dump written once) is a module-scoped fixture. Helpers live in modules without the
test_ prefix (gdtest.py, analysis_dumps.py, ...), which pytest does not collect; this
directory is on sys.path (pytest's default import mode puts it there), so tests import them
by name.

A file not yet in that style, one that still runs as a script (it calls gdtest.finish() or
has an `if __name__ == "__main__":` block), is collected as one test that runs it with this
Python as before and fails when it exits non-zero, instead of running its top-level code
while pytest imports it. A script that runs pytest on itself (pytest.main in its __main__
block) is collected as an ordinary module in that inner run (_AS_SCRIPT in its environment)."""
import os
import re
import subprocess
import sys

import pytest

import gdtest

_AS_SCRIPT = "GRAPHDUMP_E2E_AS_SCRIPT"
_SCRIPT = re.compile(r"^\s*(?:\w+\.)?finish\(\)|^if __name__ == ['\"]__main__['\"]:", re.M)


@pytest.fixture
def scratch():
    """A scratch directory (a str) for one test, removed after it even where the test made
    parts of it read-only (dumps are large: pytest's tmp_path would keep them)."""
    work = gdtest.temp_dir()
    yield work
    gdtest.cleanup(work)


@pytest.fixture(scope="module")
def module_scratch():
    """A scratch directory shared by a module's tests (for setup made once), removed after
    them."""
    work = gdtest.temp_dir()
    yield work
    gdtest.cleanup(work)


@pytest.fixture
def path(scratch):
    """path(name): a path named `name` in the test's scratch directory (a str)."""
    return lambda name: os.path.join(scratch, name)


class ScriptFailed(Exception):
    pass


class ScriptItem(pytest.Item):
    """A whole script as one test: passes when `python3 FILE` exits 0."""

    def runtest(self):
        p = subprocess.run([sys.executable, str(self.path)], capture_output=True, text=True,
                           env=dict(os.environ, **{_AS_SCRIPT: "1"}))
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        if p.returncode != 0:
            raise ScriptFailed(f"{self.path.name} exited {p.returncode}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ScriptFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


class ScriptFile(pytest.File):
    def collect(self):
        yield ScriptItem.from_parent(self, name=self.path.stem)


def pytest_pycollect_makemodule(module_path, parent):
    if _AS_SCRIPT not in os.environ and _SCRIPT.search(module_path.read_text()):
        return ScriptFile.from_parent(parent, path=module_path)
    return None
