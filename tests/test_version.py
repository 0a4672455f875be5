"""edsb's version is written once, in pyproject.toml, and read from the installed package's metadata: `edsb
--version`, config.json and the run card all say the same."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError

import pytest

import edsb
from edsb import __version__
from edsb.runner.config import RunConfig
from tests.support.data import REPO


def test_the_version_is_pyprojects() -> None:
    written = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert __version__ == written, "reinstall edsb (pip install -e .) after changing its version"
    assert RunConfig().edsb_version == __version__


def test_the_changelog_has_a_section_for_the_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
    assert changelog[0] == "# Changelog" and "## Unreleased" in changelog
    assert any(line.startswith(f"## {__version__} — ") for line in changelog)


def test_a_source_tree_not_installed_reads_its_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(edsb, "version", not_installed)
    assert edsb._version() == __version__
