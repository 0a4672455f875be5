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

from edsb.sandbox.provenance import MARK, edsb_module


def program_code(code: types.CodeType) -> frozenset[types.CodeType]:
    """A compiled program's code object and every code object nested in it (functions, lambdas, generators)."""
    found = {code}
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            found |= program_code(constant)
    return frozenset(found)


def is_models_fault(exc: BaseException, model_code: Collection[types.CodeType]) -> bool:
    """True if `exc` is the model's (see the module notes). `model_code` holds the program's code objects and those
    of the guards that stand for its operations; the traceback's first frame, the one that caught `exc` (the
    worker's), is not looked at."""
    if getattr(exc, MARK, False) is True:
        return True
    frames: list[types.FrameType] = []
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    last = max((i for i, frame in enumerate(frames) if frame.f_code in model_code), default=-1)
    return not any(edsb_module(frame) for frame in frames[last + 1 :])
