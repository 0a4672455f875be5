"""Short functions: none in src/ is 60 lines or longer, its decorators and signature included."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "edsb"
LIMIT = 60


def lengths(source: str) -> dict[str, int]:
    """Each function of a module (methods and nested functions too), by `line:name`, with its length in lines."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            found[f"{node.lineno}:{node.name}"] = (node.end_lineno or node.lineno) - start + 1
    return found


def test_the_measure_counts_decorators_and_signature() -> None:
    source = "@decorator(\n    1,\n)\ndef f(\n    a: int,\n) -> int:\n    return a\n"
    assert lengths(source) == {"4:f": 7}


def test_no_function_in_src_is_60_lines_or_longer() -> None:
    long = {
        f"{path.relative_to(SRC)}:{where}": size
        for path in sorted(SRC.rglob("*.py"))
        for where, size in lengths(path.read_text(encoding="utf-8")).items()
        if size >= LIMIT
    }
    assert long == {}
