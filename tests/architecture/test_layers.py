"""The package stack of docs/design.md, enforced: a package imports only packages below it (lazy imports inside
functions included), so the architecture stays readable from the folder list and no cycle can creep in."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "edsb"

# Bottom to top, as in docs/design.md. A module may import its own package and any package of an earlier layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors", "group_commit"),
    ("settings",),
    ("text",),
    ("results",),
    ("data",),
    ("geometry",),
    ("scoring",),
    ("llm",),
    ("sandbox",),
    ("planning",),
    ("runner",),
    ("report",),
    ("inspect_tasks",),
    ("cli",),
    ("__main__",),
)
LAYER_OF = {package: index for index, names in enumerate(LAYERS) for package in names}


def package_of(path: Path) -> str:
    """`edsb/planning/code.py` -> `planning`, `edsb/cli.py` -> `cli`."""
    parts = path.relative_to(SRC).with_suffix("").parts
    return parts[0]


def edsb_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported top-level edsb package) of every import in a module, wherever it sits."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "edsb":
            # `from edsb import cli` imports a package; `from edsb import __version__` the top-level module.
            names = [
                f"edsb.{a.name}" if (SRC / a.name).exists() or (SRC / f"{a.name}.py").exists() else "edsb"
                for a in node.names
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "edsb":
                found.append((node.lineno, parts[1] if len(parts) > 1 else "__init__"))
    return found


MODULES = sorted(SRC.rglob("*.py"))


def test_every_package_has_a_layer() -> None:
    packages = {package_of(path) for path in MODULES}
    assert packages <= set(LAYER_OF), f"add {sorted(packages - set(LAYER_OF))} to LAYERS and to docs/design.md"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down_the_stack(path: Path) -> None:
    own = package_of(path)
    upward = [
        f"line {line}: {own} imports {target}"
        for line, target in edsb_imports(path)
        if target != own and LAYER_OF.get(target, len(LAYERS)) >= LAYER_OF[own]
    ]
    assert not upward, upward


def test_the_stack_is_documented() -> None:
    design = (SRC.parents[1] / "docs" / "design.md").read_text(encoding="utf-8")
    for names in LAYERS[1:-2]:
        for package in names:
            if not (SRC / package).is_dir():
                continue
            assert f"| `{package}` |" in design, f"{package} missing from the package table of docs/design.md"


RESTRICTED = SRC / "sandbox" / "restricted"


@pytest.mark.parametrize(
    "path", [p for p in MODULES if p.parent == SRC / "sandbox"], ids=lambda p: str(p.relative_to(SRC))
)
def test_the_default_sandbox_path_reaches_the_restricted_one_through_one_call(path: Path) -> None:
    """The default path (pool, worker, kernel, exact, wire, code_api, ...) reads without `sandbox/restricted/`: only
    the worker names it, and only its package (`run_restricted`, `PRELOADED`), never a module inside it."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("edsb.sandbox.restricted"):
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.module == "edsb.sandbox":
            names += [f"edsb.sandbox.{a.name}" for a in node.names if a.name == "restricted"]
    allowed = {"edsb.sandbox.restricted"} if path.name == "worker.py" else set()
    assert set(names) <= allowed, names
    assert RESTRICTED.is_dir()
