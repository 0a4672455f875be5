"""What model code set, turned into a plan the way the reference converts it (docs/reference.md#plan-conversion), for
each planning mode.

The sandbox (`edsb.sandbox`) runs the code and hands back the raw handles; `run_plan_code_noting_repairs` (the
pipeline's call) and `run_plan_code` are that call followed by this conversion and the plan limits, in the parent.

Ordering decision (docs/reference.md#action-order): the reference deduplicates action lists through a `set`, so the
saved order depends on `PYTHONHASHSEED`. We keep the first occurrence of each action instead (the chosen action, then
`sit` / `lie`), which is one of the orders the reference can produce and never changes a verdict (the judge tests
membership only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from edsb.planning.variants import PlanningMode
from edsb.results import ErrorKind
from edsb.sandbox import (
    CodeContext,
    CodeError,
    Opaque,
    Plain,
    RawPlan,
    SandboxLimits,
    exception_text,
    execute_plan_code,
)
from edsb.settings.limits import PLAN_CHARACTERS, PLAN_RELATIONSHIPS, PLAN_STRING_CHARS

Plan: TypeAlias = dict[str, dict[str, Any]]


def plan_from_raw(raw: RawPlan, mode: PlanningMode) -> Plan:
    """The plan the reference derives from the executed handles (docs/reference.md#plan-conversion), or
    CodeError(`code_plan`) where it fails.

    `event` (LCPS) and `no_event` (w/o Event): `target_action` becomes `[action]`, `relationships` the position
    strings (`interact with X` read as `adjacent to X`) then the orientation string, `sit` / `lie` is appended for the
    first relationship starting with `sit on` / `lie on`, duplicates are dropped. `event_no_lcps` (Direct
    Inference): `sampled_position` is a copy of the position list (tuples fail), `relationships` is empty, no
    posture. Characters outside the event are kept; choosing among them is the caller's business. Steps run
    phase by phase over all characters, like the reference's loops, so the first failure is the same one.

    Each failure is raised where the reference's conversion fails on what the model's code set, with the exception
    the reference meets there (`_unusable`); any other exception from here is a fault of edsb.
    """
    if mode == "event_no_lcps":
        return _direct_plan(raw)
    return _relationship_plan(raw, concatenate=mode == "no_event")


def _unusable(exc: Exception) -> CodeError:
    """The model's code set something the reference cannot convert: `code_plan`, with the reference's exception."""
    return CodeError(ErrorKind.CODE_PLAN, exception_text(exc))


def _relationship_plan(raw: RawPlan, *, concatenate: bool) -> Plan:
    entries = [(_plan_key(c.character), c) for c in raw.characters]
    relationships: dict[str, list[str]] = {}
    for key, entry in entries:
        if concatenate and isinstance(entry.position, tuple):  # w/o Event adds the lists: tuple + list fails
            raise _unusable(TypeError('can only concatenate tuple (not "list") to tuple'))
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


@dataclass(frozen=True)
class PlanLimits:
    """How big a plan model code may set. Honest plans name a few characters with a few short conditions; the
    parent samples a position per character and relationship and the judge reads every string, so a plan beyond
    these is the model's `code_output` error (the sandbox's `max_plan_bytes` bounds its JSON size as well)."""

    characters: int = PLAN_CHARACTERS  # characters in the plan
    relationships: int = PLAN_RELATIONSHIPS  # relationships (position and orientation conditions) per character
    string_chars: int = PLAN_STRING_CHARS  # characters of any one string: a name, an action, a condition

    def check(self, plan: Plan) -> Plan:
        """`plan`, or CodeError(`code_output`) naming the first limit it exceeds and the option that raises it."""
        if len(plan) > self.characters:
            raise self._over(f"sets {len(plan):,} characters", self.characters, "max-plan-characters")
        for name, entry in plan.items():
            if len(name) > self.string_chars:
                raise self._over(f"names a character of {len(name):,} characters", self.string_chars)
            relationships = entry.get("relationships", ())
            if len(relationships) > self.relationships:
                raise self._over(
                    f"gives {len(relationships):,} relationships to one character",
                    self.relationships,
                    "max-plan-relationships",
                )
            for values in entry.values():
                for value in values if isinstance(values, list) else (values,):
                    if isinstance(value, str) and len(value) > self.string_chars:
                        raise self._over(f"holds a string of {len(value):,} characters", self.string_chars)
        return plan

    @staticmethod
    def _over(what: str, limit: int, option: str = "max-plan-string-chars") -> CodeError:
        return CodeError(ErrorKind.CODE_OUTPUT, f"the plan {what}; the limit is {limit:,} (--{option})")


def run_plan_code(
    reply: str,
    context: CodeContext,
    mode: PlanningMode,
    limits: SandboxLimits | None = None,
    plan_limits: PlanLimits | None = None,
) -> Plan:
    """The reply's code run in a sandbox worker (`execute_plan_code`), then converted for the planning mode and
    checked against `plan_limits`."""
    return run_plan_code_noting_repairs(reply, context, mode, limits, plan_limits)[0]


def run_plan_code_noting_repairs(
    reply: str,
    context: CodeContext,
    mode: PlanningMode,
    limits: SandboxLimits | None = None,
    plan_limits: PlanLimits | None = None,
) -> tuple[Plan, bool]:
    """`run_plan_code`, and whether the worker had to replace lone surrogates in what the code handed back (the
    result records it)."""
    raw = execute_plan_code(reply, context, limits)
    return (plan_limits or PlanLimits()).check(plan_from_raw(raw, mode)), raw.repaired


def _direct_plan(raw: RawPlan) -> Plan:
    plan: Plan = {}
    for c in raw.characters:
        if not isinstance(c.position, list):  # the model set a tuple or an Area, which the reference cannot copy()
            raise _unusable(AttributeError(f"'{_type_name(c.position)}' object has no attribute 'copy'"))
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
    # The model set a position the reference cannot iterate.
    raise _unusable(TypeError(f"'{_type_name(position)}' object is not iterable"))


def _normalise_relationship(value: Plain) -> str:
    if not isinstance(value, str):  # the model put a non-string among the conditions
        raise _unusable(AttributeError(f"'{_type_name(value)}' object has no attribute 'startswith'"))
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
        # The model's action cannot go into the reference's set.
        if isinstance(action, Opaque) and not action.hashable:
            raise _unusable(TypeError(f"unhashable type: '{action.type_name}'"))
        if isinstance(action, list):
            raise _unusable(TypeError("unhashable type: 'list'"))
        try:
            kept.setdefault(action, action)
        except TypeError:  # a tuple holding a list
            raise _unusable(TypeError("unhashable type: 'list'")) from None
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
