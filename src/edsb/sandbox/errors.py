"""What can go wrong when model code runs: the model's failures (`CodeError`, an execution error of the run), and
edsb's own (`SandboxError` when the sandbox cannot work, `EdsbFault` for a bug met while the code ran), which are
never the model's."""

from __future__ import annotations

from typing import Any

from edsb.errors import EdsbError
from edsb.results import ErrorKind, RunError


class CodeError(RunError):
    """Model code that yields no plan; `kind` is one of the `code_*` kinds of `ErrorKind`."""

    kind = ErrorKind.CODE_RUNTIME
    repaired = False  # the sandbox replaced lone surrogates in the message (`wire.replace_surrogates`)

    def __init__(self, kind: ErrorKind | str, message: str) -> None:
        super().__init__(message)
        self.kind = ErrorKind(kind)
        if not self.kind.value.startswith("code_"):
            raise ValueError(f"{kind} is not a kind of code error")
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.message))


class SandboxError(EdsbError):
    """The sandbox itself cannot work (a worker does not start or a scene cannot be loaded): not the model's fault."""


class EdsbFault(Exception):
    """A bug of edsb met while the model's code ran (an exception nothing the model wrote explains): the run is
    `incomplete` with kind `internal_error`, never the model's execution error. The message locates the fault."""


def exception_text(exc: BaseException) -> str:
    """`KeyError: 'chair_99'`: the class name and `str()` of an exception, as the reference's error logs show it.

    Rendering runs code of the exception's values, and model code can make it fail (`ValueError(10 ** 5000)`: the
    integer has too many digits to print; a structure nested too deep). That is still the exception's text, not a
    new failure: a placeholder says what happened. Running out of memory while rendering is not hidden.
    """
    name = type(exc).__name__
    try:
        text = str(exc)
    except MemoryError:
        raise
    except Exception as failure:
        return f"{name}: <its message could not be rendered: {type(failure).__name__}>"
    if not isinstance(text, str):  # pragma: no cover - str() always returns a str
        return name
    return f"{name}: {text}" if text else name
