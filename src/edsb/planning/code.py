"""Model-written plan code: finding it in a reply, preparing it the way the reference does, and turning what it set
into a plan (§4.1, §4.5).

The reference runs model code by textual surgery followed by `exec`. We keep the surgery (its side effects decide
verdicts: a helper whose name contains an API name stops compiling, a wrong entry signature fails on call, names
defined at top level are invisible inside the entry function) and replace the `exec` by the sandbox
(`edsb.planning.sandbox`). Everything here is pure and runs in the parent as well as in the sandbox worker.

Ordering decision (§9.14): the reference deduplicates action lists through a `set`, so the saved order depends on
`PYTHONHASHSEED`. We keep the first occurrence of each action instead (the chosen action, then `sit` / `lie`), which
is one of the orders the reference can produce and never changes a verdict (the judge tests membership only).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from edsb.planning.code_api import API_FUNCTIONS
from edsb.planning.variants import PlanningMode
from edsb.results import RunError

# --- errors -----------------------------------------------------------------------------------------------------------


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


def exception_text(exc: BaseException) -> str:
    """`KeyError: 'chair_99'`: the class name and `str()` of an exception, as the reference's error logs show it."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- extraction -------------------------------------------------------------------------------------------------------

_OPEN_FENCE = "```python"
_FENCE = "```"
_WHITESPACE_RUN = re.compile(r"\s+")


def extract_code(reply: str) -> str:
    """The code of a reply: the first ```` ```python ```` block, else the whole reply (prose included, §9.8).

    A block opens with exactly ```` ```python ````, optional whitespace and a newline, and ends at the first later
    newline followed by optional whitespace and ```` ``` ````. The reference finds it with a lazy regular expression
    whose backtracking is quadratic on long whitespace runs; this scan gives the same answer in linear time, so the
    harness can call it on any reply.
    """
    block = _first_python_block(reply)
    return reply if block is None else block


def _first_python_block(text: str) -> str | None:
    runs = {m.start(): m.end() for m in _WHITESPACE_RUN.finditer(text)}
    # Valid block ends: a newline whose whitespace run is followed by a fence.
    ends: list[int] = []
    for start, stop in runs.items():
        if text.startswith(_FENCE, stop):
            ends.extend(i for i in range(start, stop) if text[i] == "\n")
    ends.sort()
    position = text.find(_OPEN_FENCE)
    while position >= 0:
        after = position + len(_OPEN_FENCE)
        stop = runs.get(after)
        if stop is not None:
            newlines = [i for i in range(after, stop) if text[i] == "\n"]
            # Greedy whitespace first: the body starts after the last newline of the run, then earlier ones.
            for newline in reversed(newlines):
                body_start = newline + 1
                k = bisect.bisect_left(ends, body_start + 1)  # the body holds at least one character
                if k < len(ends):
                    return text[body_start : ends[k]]
        position = text.find(_OPEN_FENCE, position + 1)
    return None


# --- the rewrite ------------------------------------------------------------------------------------------------------

ENTRY_NAME = "parse_event"
ENTRY_HEADERS = ("def parse_event():", "def generate_next_plan():")
_ENTRY_METHOD_HEADER = "def parse_event(self):"
_REWRITES: dict[str, str] = {
    **dict.fromkeys(ENTRY_HEADERS, _ENTRY_METHOD_HEADER),
    **{name: f"self.{name}" for name in API_FUNCTIONS},
}
_REWRITE_PATTERN = re.compile("|".join(re.escape(key) for key in sorted(_REWRITES, key=len, reverse=True)))


def prepare_code(code: str) -> str:
    """The code as the reference executes it: exact entry headers become a method header, every API name (as a
    plain substring, comments and strings included) becomes `self.<name>`, and the result is stripped.

    The reference writes `self._<name>`; our API object exposes the same functions without the underscore (the
    sandbox forbids underscore attributes). The verdicts are the same: `my_get_character` becomes `my_self...` (a
    NameError), `def get_closest_object_2(...)` no longer compiles, and so on.
    """
    return _REWRITE_PATTERN.sub(lambda match: _REWRITES[match.group(0)], code).strip()


# --- what the code set ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Opaque:
    """A value set by model code that has no plain-data form (an Area inside a list, a handle, a dict, ...).

    Kept as its type name and repr so that converting it fails, or is judged, as the original object would be.
    """

    type_name: str
    text: str
    hashable: bool


Plain: TypeAlias = bool | int | float | str | list["Plain"] | tuple["Plain", ...] | Opaque | None


@dataclass(frozen=True)
class RawCharacterPlan:
    """One character handle after the code ran, before conversion (the reference's parsed-event entry)."""

    character: Plain  # the value passed to `get_character` (a name, normally)
    position: Plain  # an Area's condition list, or the list / tuple given to `set_position`; [] if never set
    target_action: Plain  # "" if never set
    orientation: tuple[str, ...] | None  # ("look at X",) once `set_orientation` was called


@dataclass(frozen=True)
class RawPlan:
    characters: tuple[RawCharacterPlan, ...]  # in order of each character's first setter call
    output: str = ""  # what the code printed, capped


Plan: TypeAlias = dict[str, dict[str, Any]]


def plan_from_raw(raw: RawPlan, mode: PlanningMode) -> Plan:
    """The plan the reference derives from the executed handles (§4.5), or CodeError(`code_plan`) where it fails.

    `event` (LCPS) and `no_event` (w/o Event): `target_action` becomes `[action]`, `relationships` the position
    strings (`interact with X` read as `adjacent to X`) then the orientation string, `sit` / `lie` is appended for the
    first relationship starting with `sit on` / `lie on`, duplicates are dropped. `event_no_lcps` (Direct
    Inference): `sampled_position` is a copy of the position list (tuples fail), `relationships` is empty, no
    posture. Characters outside the event are kept; choosing among them is the caller's business. Steps run
    phase by phase over all characters, like the reference's loops, so the first failure is the same one.
    """
    try:
        if mode == "event_no_lcps":
            return _direct_plan(raw)
        return _relationship_plan(raw, concatenate=mode == "no_event")
    except (AttributeError, TypeError) as exc:
        raise CodeError(CodeErrorKind.PLAN, exception_text(exc)) from None


def _relationship_plan(raw: RawPlan, *, concatenate: bool) -> Plan:
    entries = [(_plan_key(c.character), c) for c in raw.characters]
    relationships: dict[str, list[str]] = {}
    for key, entry in entries:
        if concatenate and isinstance(entry.position, tuple):  # w/o Event adds the lists: tuple + list fails
            raise TypeError('can only concatenate tuple (not "list") to tuple')
        strings = [*_iterate(entry.position), *(entry.orientation or ())]
        relationships[key] = [_normalise_relationship(s) for s in strings]
    plan: Plan = {}
    for key, entry in entries:
        actions: list[Plain] = [entry.target_action]
        for relationship in relationships[key]:
            posture = _posture(relationship)
            if posture is not None:
                actions.append(posture)
                break
        plan[key] = {"target_action": actions, "relationships": relationships[key]}
    for key in plan:
        plan[key]["target_action"] = [_to_json(a) for a in _dedupe(plan[key]["target_action"])]
    return plan


def _direct_plan(raw: RawPlan) -> Plan:
    plan: Plan = {}
    for c in raw.characters:
        if not isinstance(c.position, list):
            raise AttributeError(f"'{_type_name(c.position)}' object has no attribute 'copy'")
        entry: dict[str, Any] = {"target_action": [c.target_action]}
        if c.orientation is not None:
            entry["orientation"] = list(c.orientation)
        entry["relationships"] = []
        entry["sampled_position"] = _to_json(c.position)
        plan[_plan_key(c.character)] = entry
    for entry in plan.values():
        entry["target_action"] = [_to_json(a) for a in _dedupe(entry["target_action"])]
    return plan


def _iterate(position: Plain) -> Iterable[Plain]:
    if isinstance(position, list | tuple):
        return position
    raise TypeError(f"'{_type_name(position)}' object is not iterable")


def _normalise_relationship(value: Plain) -> str:
    if not isinstance(value, str):
        raise AttributeError(f"'{_type_name(value)}' object has no attribute 'startswith'")
    if value.startswith("interact with"):
        return f"adjacent to {value.split(' ')[-1]}"
    return value


def _posture(relationship: str) -> str | None:
    if relationship.startswith("sit on"):
        return "sit"
    if relationship.startswith("lie on"):
        return "lie"
    return None


def _dedupe(actions: list[Plain]) -> list[Plain]:
    """Set semantics (equal and hashable values merge, unhashable ones raise TypeError), first-occurrence order."""
    kept: dict[Any, Plain] = {}
    for action in actions:
        if isinstance(action, Opaque) and not action.hashable:
            raise TypeError(f"unhashable type: '{action.type_name}'")
        if isinstance(action, list):
            raise TypeError("unhashable type: 'list'")
        try:
            kept.setdefault(action, action)
        except TypeError:  # a tuple holding a list
            raise TypeError("unhashable type: 'list'") from None
    return list(kept.values())


def _type_name(value: Plain) -> str:
    return value.type_name if isinstance(value, Opaque) else type(value).__name__


def _plan_key(character: Plain) -> str:
    """Plan keys are names; any other value the code passed to `get_character` is keyed by its text."""
    if isinstance(character, str):
        return character
    if isinstance(character, Opaque):
        return character.text
    return repr(character)


def _to_json(value: Plain) -> Any:
    """A JSON-ready copy: tuples become lists, opaque values their repr."""
    if isinstance(value, Opaque):
        return value.text
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    return value
