"""The output formats of `edsb report` and `edsb compare` (a module of its own, so the CLI can offer the choices
without importing the report machinery)."""

from enum import StrEnum


class ReportFormat(StrEnum):
    TABLE = "table"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"
    HTML = "html"  # one self-contained page (report.html)


class CompareFormat(StrEnum):
    TABLE = "table"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"
    HTML = "html"  # one self-contained page (the board)
