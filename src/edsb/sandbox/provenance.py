"""Where an exception comes from, as the code API marks it and a bug report needs it: the marks that make an
exception the model's (`caused_by_model`, `MODEL_OPERATION`: an operation on a value the model passed), and
`fault_text`, which locates a fault of edsb's own in edsb's code. The code API marks; only the restricted sandbox's
blame (`restricted.blame`) reads the marks, since under `exact` every failure is the model's.
"""

from __future__ import annotations

import types
from typing import Literal, TypeVar

from edsb.sandbox.errors import EdsbFault, exception_text

MARK = "_edsb_caused_by_model"  # model code cannot read or write underscore attributes

E = TypeVar("E", bound=BaseException)


def caused_by_model(exc: E) -> E:
    """Mark `exc` as the model's and return it: `raise caused_by_model(ValueError(...))`."""
    setattr(exc, MARK, True)
    return exc


class _ModelOperation:
    """`with MODEL_OPERATION:` around an operation on values the model's code passed. An exception the operation
    itself raises is the model's: in this frame (a failed dict lookup, slice or format), or in what Python or a
    library runs for it on those values (the `repr` of a `Counter`, which calls the `most_common` the code may have
    set). One raised in an edsb function the operation reaches is not marked here, and is judged where it was
    raised."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: types.TracebackType | None) -> Literal[False]:
        if exc is not None and tb is not None and not reaches_edsb(tb.tb_next):
            caused_by_model(exc)
        return False


MODEL_OPERATION = _ModelOperation()


def edsb_module(frame: types.FrameType) -> str | None:
    """The edsb module a frame runs in (`edsb.sandbox.code_api`), None outside edsb (model code runs as `plan_code`)."""
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) and (name == "edsb" or name.startswith("edsb.")) else None


def reaches_edsb(tb: types.TracebackType | None) -> bool:
    """Whether a traceback passes through a frame of edsb's own code."""
    while tb is not None:
        if edsb_module(tb.tb_frame):
            return True
        tb = tb.tb_next
    return False


def fault_text(exc: BaseException) -> str:
    """`KeyError: 'x' (raised at edsb/sandbox/code_api.py:120 in _edges_of)`: an edsb fault as a bug report needs
    it, located at the innermost frame inside edsb (else the innermost frame)."""
    if isinstance(exc, EdsbFault):
        return str(exc)
    innermost: str | None = None
    in_edsb: str | None = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        module = edsb_module(tb.tb_frame)
        where = module.replace(".", "/") + ".py" if module else code.co_filename
        innermost = f"{where}:{tb.tb_lineno} in {code.co_name}"
        if module:
            in_edsb = innermost
        tb = tb.tb_next
    location = in_edsb or innermost
    return exception_text(exc) if location is None else f"{exception_text(exc)} (raised at {location})"
