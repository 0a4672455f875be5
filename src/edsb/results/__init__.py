"""What one benchmark run produced, and the run directory that holds those results.

This is the vocabulary every other package shares (the pipeline writes it, the runner stores it, the report reads
it), so it sits at the bottom of the package stack and imports nothing of edsb but `edsb.errors` and `edsb.text`.
"""

from edsb.results.kinds import ErrorKind, RunError, RunStatus
from edsb.results.record import RunKey, RunResult, internal_error_message

__all__ = ["ErrorKind", "RunError", "RunKey", "RunResult", "RunStatus", "internal_error_message"]
