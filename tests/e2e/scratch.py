"""The scratch directory of a pytest-style end-to-end test module: `work`, made once for the
module and removed (gdtest.cleanup) after its last test. A test module imports it:

    from scratch import work  # noqa: F401  (a pytest fixture)
"""
import pytest

import gdtest


@pytest.fixture(scope="module")
def work():
    path = gdtest.temp_dir()
    yield path
    gdtest.cleanup(path)
