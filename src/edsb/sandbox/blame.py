"""Whose fault is an exception raised while model code ran: the model's (an execution error, as the reference counts
it) or edsb's own (a bug: the run is `incomplete` with kind `internal_error`, never scored against the model)?

It is the model's when

* it was raised in the model's own code, or in what that code called without edsb in between: the compiled program,
  the guards that perform its own operations for it (`a[b]`, `a.b`, `f(*args)`, unpacking, `print`, `d[k] += v`
  become guard calls under RestrictedPython), builtins and the `re` functions it calls. A call with the wrong number
  or names of arguments fails there too, in the call itself, before the callee runs;
* or edsb marked it where it was raised: a code API operation on a value the model passed (a name lookup, a label
  slice, formatting, a comparison), or one of the API's deliberate errors (an object that is not in the scene, ...),
  each raising what the reference raises at that point, so verdicts and messages stay the reference's.

Anything else, raised in edsb's code or in what edsb's code called (the API's own bookkeeping, geometry, numpy), is
edsb's.
"""

from __future__ import annotations

import types
from collections.abc import Collection
from typing import Literal, TypeVar

from edsb.sandbox.errors import EdsbFault, exception_text

_MARK = "_edsb_caused_by_model"  # model code cannot read or write underscore attributes

E = TypeVar("E", bound=BaseException)


def caused_by_model(exc: E) -> E:
    """Mark `exc` as the model's and return it: `raise caused_by_model(ValueError(...))`."""
    setattr(exc, _MARK, True)
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
        if exc is not None and tb is not None and not _reaches_edsb(tb.tb_next):
            caused_by_model(exc)
        return False


MODEL_OPERATION = _ModelOperation()


def program_code(code: types.CodeType) -> frozenset[types.CodeType]:
    """A compiled program's code object and every code object nested in it (functions, lambdas, generators)."""
    found = {code}
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            found |= program_code(constant)
    return frozenset(found)


def _edsb_module(frame: types.FrameType) -> str | None:
    """The edsb module a frame runs in (`edsb.sandbox.code_api`), None outside edsb (model code runs as `plan_code`)."""
    name = frame.f_globals.get("__name__")
    return name if isinstance(name, str) and (name == "edsb" or name.startswith("edsb.")) else None


def _reaches_edsb(tb: types.TracebackType | None) -> bool:
    """Whether a traceback passes through a frame of edsb's own code."""
    while tb is not None:
        if _edsb_module(tb.tb_frame):
            return True
        tb = tb.tb_next
    return False


def is_models_fault(exc: BaseException, model_code: Collection[types.CodeType]) -> bool:
    """True if `exc` is the model's (see the module notes). `model_code` holds the program's code objects and those
    of the guards that stand for its operations; the traceback's first frame, the one that caught `exc` (the
    worker's), is not looked at."""
    if getattr(exc, _MARK, False) is True:
        return True
    frames: list[types.FrameType] = []
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    last = max((i for i, frame in enumerate(frames) if frame.f_code in model_code), default=-1)
    return not any(_edsb_module(frame) for frame in frames[last + 1 :])


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
        module = _edsb_module(tb.tb_frame)
        where = module.replace(".", "/") + ".py" if module else code.co_filename
        innermost = f"{where}:{tb.tb_lineno} in {code.co_name}"
        if module:
            in_edsb = innermost
        tb = tb.tb_next
    location = in_edsb or innermost
    return exception_text(exc) if location is None else f"{exception_text(exc)} (raised at {location})"
