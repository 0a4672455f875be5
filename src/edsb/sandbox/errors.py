"""What can go wrong when model code runs: the model's failures (`CodeError`, an execution error of the run), and
edsb's own (`SandboxError` when the sandbox cannot work, `EdsbFault` for a bug met while the code ran), which are
never the model's."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from edsb.errors import EdsbError, RunError


class CodeErrorKind(StrEnum):
    """Why model code produced no plan. Every kind is an execution error of the run."""

    SYNTAX = "code_syntax"  # the prepared code does not compile (prose executed as code, a mangled `def`, ...)
    POLICY = "code_policy"  # the sandbox refused something (import, underscore attribute, file, class, ...)
    RUNTIME = "code_runtime"  # the code raised; the message is `<ExceptionClass>: <text>`
    NO_ENTRY = "code_no_entry"  # no callable `parse_event(self)` after the rewrite
    TIMEOUT = "code_timeout"  # wall-clock or CPU limit reached; the worker was killed
    MEMORY = "code_memory"  # the memory limit was reached
    OUTPUT = "code_output"  # the plan or printed text exceeds the size cap
    PLAN = "code_plan"  # the code ran, but what it set cannot become a plan (the reference fails converting it)
    CRASH = "code_crash"  # the worker died for another reason


class CodeError(RunError):
    """Model code that yields no plan; `kind` is one of `CodeErrorKind`'s values."""

    kind = "code_runtime"

    def __init__(self, kind: CodeErrorKind | str, message: str) -> None:
        super().__init__(message)
        self.kind = CodeErrorKind(kind).value
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.message))


class SandboxError(EdsbError):
    """The sandbox itself cannot work (a worker does not start or a scene cannot be loaded): not the model's fault."""


class EdsbFault(Exception):
    """A bug of edsb met while the model's code ran (an exception nothing the model wrote explains): the run is
    `incomplete` with kind `internal_error`, never the model's execution error. The message locates the fault."""


def exception_text(exc: BaseException) -> str:
    """`KeyError: 'chair_99'`: the class name and `str()` of an exception, as the reference's error logs show it."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
