"""The output formats of `edsb report` and `edsb compare`, the order they list variants in and the counted nouns
their text uses (a module of its own, so the CLI can offer the choices and word its messages without importing the
report machinery)."""

from collections.abc import Iterable
from enum import StrEnum

from edsb.planning.variants import VARIANTS


class ReportFormat(StrEnum):
    TABLE = "table"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"  # the results document (results.json): the run card and every cell (docs/results-schema.md)
    SAMPLES = "samples"  # one self-contained JSON line per run: texts, code, plan, verdict
    HTML = "html"  # one self-contained page (report.html)


class CompareFormat(StrEnum):
    TABLE = "table"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"
    HTML = "html"  # one self-contained page (the board)


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`1 run`, `3 runs`: a count with its noun in the right number (`many`: an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def variant_rank(name: str) -> tuple[int, str]:
    """Sort key of variants in every report, comparison and leaderboard: the order of the presets and the paper's
    tables (Ours, w/o Event, Object List, Scene Graph, Direct Inference), unknown names after them by name."""
    order = list(VARIANTS)
    return (order.index(name) if name in order else len(order), name)


def paper_order(names: Iterable[str]) -> list[str]:
    """Distinct variant names in the paper's order (`variant_rank`)."""
    return sorted(set(names), key=variant_rank)
