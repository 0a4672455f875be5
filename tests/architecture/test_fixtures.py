"""One definition per fixture: a name a test asks for means one thing across the suite, defined in the conftest
where its tests live (or in the one test file that uses it)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def _fixtures() -> dict[str, list[str]]:
    """Every fixture's name, and the files that define one by that name."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(_is_fixture(d) for d in node.decorator_list):
                found[node.name].append(str(path.relative_to(TESTS)))
    return found


def test_each_fixture_name_is_defined_once() -> None:
    fixtures = _fixtures()
    assert len(fixtures) > 20  # the control: the walk finds the suite's fixtures
    assert {name: files for name, files in fixtures.items() if len(files) > 1} == {}
