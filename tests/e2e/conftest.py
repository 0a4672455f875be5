"""End-to-end tests: the real `edsb` command line, real data, a real loopback server or the embedded model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.edsb_cli import isolate_environment


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_environment(monkeypatch, tmp_path / "cache")
