import shutil
from pathlib import Path

import pytest

from tests.support.data import DATA

SHARED = DATA


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    """A private, writable copy of the benchmark data that a test may corrupt."""
    target = tmp_path / "edsb-data"
    shutil.copytree(SHARED, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target
