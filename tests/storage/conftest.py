"""The SQLite vector index's loops, both ways: NumPy always, numba where it is installed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from confide.storage import vector_kernels


@pytest.fixture(params=["numpy", "numba"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with the NumPy loops, then with numba's (skipped without the extra)."""
    if request.param == "numba" and not vector_kernels.numba_available():
        pytest.skip("numba is not installed (the `fast` extra)")
    vector_kernels.use_numba(request.param == "numba")
    yield request.param
    vector_kernels.use_numba(True)
