"""The outcome of judging one plan: pass, failure, or an execution error with a named cause."""

from __future__ import annotations

from dataclasses import dataclass, field

from edsb.results import ErrorKind


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    error: ErrorKind | None = None
    message: str | None = None
    # Why a judged plan failed (which character, which condition), for people reading results; never part of
    # equality, so two verdicts that score alike compare equal whatever their explanation.
    reason: str | None = field(default=None, compare=False)

    @property
    def errored(self) -> bool:
        """An execution error (which never passes), as opposed to a plan judged false."""
        return self.error is not None

    def describe_error(self) -> str | None:
        """`<kind>: <message>`, the form result files carry, or None for a clean verdict."""
        if self.error is None:
            return None
        return f"{self.error.value}: {self.message}" if self.message else self.error.value

    def explain(self) -> str | None:
        """Why the plan did not pass: the error for an execution error, else the failure reason (None if it passed)."""
        if self.passed:
            return None
        return self.describe_error() or self.reason


PASSED = Verdict(True)
FAILED = Verdict(False)


class PlanRejected(Exception):
    """Raised inside the checks where the reference raises, caught by the judge and turned into a Verdict."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def verdict(self) -> Verdict:
        return Verdict(False, self.kind, self.message)
