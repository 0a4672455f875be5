"""The condition language of the expected plans (docs/reference.md#conditions), parsed once and evaluated by any atom
callback.

A condition such as `sit on chair_9 || (in front of chair_1 && in front of chair_3)` is split into operator tokens
(`||`, `&&`, `(`, `)`) and atoms (the trimmed text between them). The grammar is

    expr   := term ('||' term)*
    term   := factor ('&&' factor)*
    factor := '(' expr ')' | atom

with one quirk kept for parity with the reference: where an operand is expected, any token other than `(` is read
as an atom, even `)` or `||`; such atoms then fail whatever check reads them. The parser keeps the atom text
verbatim, so `!x` means nothing here: only the action check gives it a meaning.

Evaluation visits every atom left to right (no short-circuit), so a validation error in any atom surfaces exactly
as in the reference, and combines values with `&` / `|`, which serves Python bools and numpy boolean arrays alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Any, Protocol, TypeVar


class Logical(Protocol):
    """What conditions combine with `&` and `|`: Python bools, or numpy boolean arrays element-wise."""

    def __and__(self, other: Any, /) -> Any: ...

    def __or__(self, other: Any, /) -> Any: ...


T = TypeVar("T", bound=Logical)

_OPERATORS = re.compile(r"(\|\||&&|[()])")


class ConditionSyntaxError(SyntaxError):
    """A condition that does not parse: leftover tokens, a missing `)`, or no operand where one is needed."""


@dataclass(frozen=True, slots=True)
class Atom:
    text: str


@dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Condition, ...]


Condition = Atom | AllOf | AnyOf


def tokenize(text: str) -> list[str]:
    pieces = (piece.strip() for piece in _OPERATORS.split(text))
    return [piece for piece in pieces if piece]


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def expression(self) -> Condition:
        return self._chain("||", self.term, AnyOf)

    def term(self) -> Condition:
        return self._chain("&&", self.factor, AllOf)

    def _chain(self, operator: str, operand: Callable[[], Condition], node: type[AllOf] | type[AnyOf]) -> Condition:
        parts = [operand()]
        while self._peek() == operator:
            self.position += 1
            parts.append(operand())
        return parts[0] if len(parts) == 1 else node(tuple(parts))

    def factor(self) -> Condition:
        token = self._peek()
        if token is None:
            raise ConditionSyntaxError("Condition ends where an operand is expected")
        self.position += 1
        if token != "(":
            return Atom(token)
        inner = self.expression()
        if self._peek() != ")":
            raise ConditionSyntaxError("Expected ')'")
        self.position += 1
        return inner


@lru_cache(maxsize=4096)
def parse_condition(text: str) -> Condition:
    """Parse a non-empty condition; raises ConditionSyntaxError. Results are cached: cases reuse few conditions."""
    parser = _Parser(tokenize(text))
    tree = parser.expression()
    if parser.position != len(parser.tokens):
        raise ConditionSyntaxError("Unexpected tokens at the end")
    return tree


def iter_atoms(condition: Condition) -> Iterator[str]:
    """Atom texts in reading order (duplicates kept)."""
    if isinstance(condition, Atom):
        yield condition.text
    else:
        for part in condition.parts:
            yield from iter_atoms(part)


def evaluate_condition(condition: Condition, atom_value: Callable[[str], T]) -> T:
    """Value of the condition, calling `atom_value` once per atom occurrence, left to right, with no short-circuit."""
    if isinstance(condition, Atom):
        return atom_value(condition.text)
    values = [evaluate_condition(part, atom_value) for part in condition.parts]
    if isinstance(condition, AllOf):
        return reduce(lambda left, right: left & right, values)
    return reduce(lambda left, right: left | right, values)
