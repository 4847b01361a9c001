"""pytest settings of the end-to-end tests (ctest runs each test_*.py with
`python3 -m pytest -q -p no:cacheprovider FILE`; see tests/CMakeLists.txt).

A test is a plain `def test_...()` function; shared setup that is expensive (a model trained
once, a dump written once) is a module-scoped fixture. Helpers live in modules without the
test_ prefix (gdtest.py, analysis_dumps.py, ...), which pytest does not collect; this
directory is on sys.path (pytest's default import mode puts it there), so tests import them
by name. A scratch directory is the `scratch` (one test) or `module_scratch` (a module's
tests) fixture below, which a test names as an argument without importing it. A file may end
with `if __name__ == "__main__": sys.exit(pytest.main(["-q", "-p", "no:cacheprovider",
__file__]))` to run as `python3 FILE` too."""
import os

import pytest

import gdtest


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
