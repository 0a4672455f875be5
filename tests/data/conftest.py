from pathlib import Path

import pytest

from tests.support.data import writable_copy


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A private, writable copy of the benchmark data that a test may corrupt."""
    return writable_copy(tmp_path / "edsb-data")
