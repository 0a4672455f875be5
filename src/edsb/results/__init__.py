"""What one benchmark run produced, and the run directory that holds those results.

This is the vocabulary every other package shares (the pipeline writes it, the runner stores it, the report reads
it), so it sits at the bottom of the package stack and imports nothing of edsb but `edsb.errors` and `edsb.text`.
"""

from typing import TYPE_CHECKING, Any

from edsb.results.kinds import ErrorKind, RunError, RunStatus

if TYPE_CHECKING:
    from edsb.results.record import RunKey, RunResult, internal_error_message


def __getattr__(name: str) -> Any:
    """The records (pydantic), imported on first use: the sandbox's template needs the kinds alone."""
    if name in ("RunKey", "RunResult", "internal_error_message"):
        from edsb.results import record

        return getattr(record, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ErrorKind", "RunError", "RunKey", "RunResult", "RunStatus", "internal_error_message"]
