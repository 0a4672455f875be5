"""Values whose special methods fail, for the sandbox's blame tests: plan code cannot define special methods, so a
test hands such a value to it through the scene, as the label of an object (`get_object_supporting(...).label`).

A `Hostile` is an ordinary string in the process that made it (the test's, which builds the scene and its graph
with it) and fails only once unpickled, that is in the sandbox process that received the scene. A contained sandbox
process cannot import this module (Landlock lets it read only what the template imported, never the test tree), so
the pickle carries this module's source and the child rebuilds the class from it.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

# Evaluated by the unpickler (`eval(REBUILD, {...})`): run this module's source in a fresh namespace, and make an
# armed `Hostile` with the class it defines.
REBUILD = "(exec(source, namespace), namespace['Hostile'](text, method, failure, True))[1]"

#: What a hostile method raises, by name (`BaseException`s other than `Exception`s included).
FAILURES = (
    "ValueError",
    "RuntimeError",
    "RecursionError",
    "MemoryError",
    "KeyboardInterrupt",
    "SystemExit",
    "GeneratorExit",
    "Interrupt",
)
#: The special methods a `Hostile` can fail in.
METHODS = ("__hash__", "__repr__", "__len__", "__iter__", "__eq__")


class Interrupt(BaseException):
    """A `BaseException` of no builtin kind, as a signal handler might raise."""


class Hostile(str):
    """A string whose `method` raises the exception `failure` names, once armed (unpickled)."""

    method: str
    failure: str
    armed: bool

    def __new__(cls, text: str, method: str, failure: str, armed: bool = False) -> Hostile:
        value = super().__new__(cls, text)
        value.method, value.failure, value.armed = method, failure, armed
        return value

    def __reduce__(self) -> tuple[Any, ...]:
        names = {"source": Path(__file__).read_text(encoding="utf-8"), "namespace": {"__name__": "hostile_values"}}
        return (eval, (REBUILD, {**names, "text": str(self), "method": self.method, "failure": self.failure}))

    def _fail(self, method: str) -> None:
        if not (self.armed and method == self.method):
            return
        if self.failure == "RecursionError":
            self._fail(method)  # a real one
        if self.failure == "MemoryError":
            "x" * (1 << 46)  # a real one, under the worker's address-space limit
        kind = Interrupt if self.failure == "Interrupt" else getattr(builtins, self.failure)
        raise kind("boom")

    def __hash__(self) -> int:
        self._fail("__hash__")
        return str.__hash__(self)

    def __repr__(self) -> str:
        self._fail("__repr__")
        return str.__repr__(self)

    def __len__(self) -> int:
        self._fail("__len__")
        return str.__len__(self)

    def __iter__(self) -> Any:
        self._fail("__iter__")
        return str.__iter__(self)

    def __eq__(self, other: object) -> bool:
        self._fail("__eq__")
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)
