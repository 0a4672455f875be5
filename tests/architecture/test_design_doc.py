"""docs/design.md's package table kept in step with the code: a row per package and top-level module, and each
package's row lists exactly the modules it has (a subpackage as `name/`), so a module added, moved or removed
without the table failing here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "edsb"
DESIGN = SRC.parents[1] / "docs" / "design.md"
ROW = re.compile(r"^\| `(?P<name>\w+)`(?P<module> \(module\))? \| (?P<modules>[^|]*)\|")
NOT_IN_THE_TABLE = {"__init__", "__main__"}  # the package's marker and `python -m edsb`


def table() -> dict[str, tuple[bool, list[str]]]:
    """The package table: name -> (whether the row is a top-level module, the modules its row lists)."""
    rows = {}
    for line in DESIGN.read_text(encoding="utf-8").splitlines():
        if match := ROW.match(line):
            rows[match["name"]] = (bool(match["module"]), re.findall(r"`([\w/]+)`", match["modules"]))
    return rows


def is_package(path: Path) -> bool:
    return path.is_dir() and (path / "__init__.py").is_file()


def modules_of(package: Path) -> set[str]:
    """A package's modules as the table names them: `name` for a module, `name/` for a subpackage."""
    modules = {path.stem for path in package.glob("*.py")} - NOT_IN_THE_TABLE
    return modules | {f"{path.name}/" for path in package.iterdir() if is_package(path)}


PACKAGES = sorted(path.name for path in SRC.iterdir() if is_package(path))
TOP_LEVEL_MODULES = sorted({path.stem for path in SRC.glob("*.py")} - NOT_IN_THE_TABLE)


def test_the_table_is_found() -> None:
    assert len(table()) >= len(PACKAGES), f"no package table in {DESIGN.name}: the pattern {ROW.pattern} finds none"


def test_every_package_and_top_level_module_has_a_row_and_nothing_else_does() -> None:
    rows = table()
    assert sorted(name for name, (module, _) in rows.items() if not module) == PACKAGES
    assert sorted(name for name, (module, _) in rows.items() if module) == TOP_LEVEL_MODULES


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_row_lists_exactly_its_modules(package: str) -> None:
    listed = table()[package][1]
    actual = modules_of(SRC / package)
    assert len(listed) == len(set(listed)), f"`{package}` lists a module twice: {listed}"
    assert not set(listed) - actual, f"docs/design.md lists modules `{package}` does not have: {set(listed) - actual}"
    assert not actual - set(listed), f"docs/design.md's `{package}` row omits {sorted(actual - set(listed))}"
