"""Judges a planning result against a case's expected plans with the official evaluator's semantics
(docs/reference.md#evaluator).

Plans are untrusted JSON. Wherever the reference evaluator would raise (including the TypeError/AttributeError it
hits on odd shapes, such as a string where a list belongs, which it iterates letter by letter), the judge returns an
execution-error Verdict naming the cause; it returns a plain failure wherever the reference returns False. The
order of the checks follows the reference, so the first problem met is the one reported.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from edsb.data.models import ExpectedPlan, TestCase
from edsb.geometry.collision import first_collision, floor_collisions
from edsb.geometry.relations import (
    ADJACENT_TO,
    CLOSE_TO,
    INSIDE,
    LIE_ON,
    LOOK_AT,
    POSTURES,
    RELATIONSHIP_PREFIXES,
    SIT_ON,
    TWO_ANCHOR_PREDICATES,
    split_anchor,
    split_two_anchors,
)
from edsb.geometry.scene import Scene
from edsb.results import ErrorKind
from edsb.scoring.conditions import (
    Condition,
    ConditionSyntaxError,
    evaluate_condition,
    iter_atoms,
    parse_condition,
)
from edsb.scoring.position import area_box_mask, position_atom_mask
from edsb.scoring.verdict import PASSED, PlanRejected, Verdict

# Postures the evaluator accepts on top of a case's action labels.

# Expected atoms with these predicates are also satisfied by the listed plan predicates on the same anchor.
_ALSO_SATISFIED_BY = {
    CLOSE_TO: (CLOSE_TO, ADJACENT_TO),
    INSIDE: (SIT_ON, LIE_ON, INSIDE),
}


def _field(entry: object, key: str, character: str) -> object:
    """`entry[key]` for a character's plan entry, which must be a JSON object holding that key."""
    if not isinstance(entry, dict):
        raise PlanRejected(ErrorKind.MALFORMED_PLAN, f"plan of {character} is {type(entry).__name__}, not an object")
    if key not in entry:
        raise PlanRejected(ErrorKind.MALFORMED_PLAN, f"plan of {character} has no {key!r}")
    return entry[key]


def _items(value: object, key: str, character: str) -> Collection[Any]:
    """The elements the evaluator iterates over: list items, object keys, or the letters of a string."""
    if isinstance(value, str | list | dict):
        return value
    raise PlanRejected(ErrorKind.MALFORMED_PLAN, f"{key} of {character} is {type(value).__name__}, not a list")


def _membership(items: Collection[Any]) -> Callable[[str], bool]:
    """How the evaluator tests `atom in items`: substring search for a string, equality for list items and keys."""
    if isinstance(items, str):
        return items.__contains__
    return frozenset(items).__contains__  # every item is a validated string here


def _parse(condition: str) -> Condition:
    try:
        return parse_condition(condition)
    except ConditionSyntaxError as exc:
        raise PlanRejected(ErrorKind.MALFORMED_CONDITION, f"{exc.msg} in {condition!r}") from None


class Judge:
    """Verdicts for one case at one distraction level (which decides the characters `look at` may name)."""

    def __init__(self, case: TestCase, level: int, scene: Scene) -> None:
        self.case = case
        self.scene = scene
        self.allowed_actions = frozenset((*case.action_labels, *POSTURES.values()))
        self.object_names = frozenset(scene.by_name)
        self.character_names = frozenset(state.name for state in case.states_at(level))

    def judge(self, plan: object) -> Verdict:
        """Verdict for a planning result `{character: {"target_action", "relationships", "sampled_position"}}`."""
        if self.case.allow_null_plan and not plan:
            return PASSED
        try:
            failures = [self._judge_character(expected, plan) for expected in self.case.expected_plans]
        except PlanRejected as rejection:
            return rejection.verdict()
        reasons = [reason for reason in failures if reason is not None]
        return PASSED if not reasons else Verdict(False, reason="; ".join(reasons))

    def _judge_character(self, expected: ExpectedPlan, plan: object) -> str | None:
        """None when this character's part of the plan holds, else why not (the first check that failed)."""
        if not isinstance(plan, dict):
            raise PlanRejected(ErrorKind.MALFORMED_PLAN, f"planning result is {type(plan).__name__}, not an object")
        name = expected.character
        if name not in plan:
            raise PlanRejected(ErrorKind.MISSING_CHARACTER, f"{name} not found in the planning result")
        entry = plan[name]
        if self.case.is_position_case:
            return self._position_failure(expected, entry)
        actions = _items(_field(entry, "target_action", name), "target_action", name)
        if not self._actions_hold(expected.target_action, actions):
            return f"{name}: action {_shown(actions)} does not satisfy {expected.target_action!r}"
        relationships = _items(_field(entry, "relationships", name), "relationships", name)
        if not self._relationships_hold(expected.relationships, relationships):
            return f"{name}: relationships {_shown(relationships)} do not satisfy {expected.relationships!r}"
        return None

    # --- action check (docs/reference.md#action-check) ---------------------------------------------------------
    def _actions_hold(self, condition: str | None, actions: Collection[Any]) -> bool:
        for action in actions:
            if not (isinstance(action, str) and action in self.allowed_actions):
                raise PlanRejected(ErrorKind.UNKNOWN_ACTION, f"unavailable action label {action!r}")
        if not condition:
            return True
        has = _membership(actions)

        def atom_holds(atom: str) -> bool:
            return not has(atom[1:]) if atom.startswith("!") else has(atom)

        return evaluate_condition(_parse(condition), atom_holds)

    # --- relationship check (docs/reference.md#relationship-check) ---------------------------------------------
    def _relationships_hold(self, condition: str | None, relationships: Collection[Any]) -> bool:
        for relationship in relationships:
            if not isinstance(relationship, str):
                raise PlanRejected(ErrorKind.MALFORMED_PLAN, f"relationship {relationship!r} is not a string")
            if not relationship.startswith(RELATIONSHIP_PREFIXES):
                raise PlanRejected(ErrorKind.UNKNOWN_RELATIONSHIP, f"unavailable relationship {relationship!r}")
        if not condition:
            return True
        has = _membership(relationships)

        def atom_holds(atom: str) -> bool:
            self._validate_expected_anchors(atom)
            anchor = split_anchor(atom)[1]
            for predicate, accepted in _ALSO_SATISFIED_BY.items():
                if atom.startswith(predicate):
                    return any(has(f"{alternative} {anchor}") for alternative in accepted)
            return has(atom)

        return evaluate_condition(_parse(condition), atom_holds)

    def _validate_expected_anchors(self, atom: str) -> None:
        """The evaluator checks the anchors of the case's own atoms (never the plan's): a broken case errors."""
        if atom.startswith(TWO_ANCHOR_PREDICATES):
            try:
                _, first, second = split_two_anchors(atom)
            except ValueError:
                raise PlanRejected(ErrorKind.MALFORMED_CONDITION, f"{atom!r} needs two anchors") from None
            self._require_anchor(second, self.object_names)
            self._require_anchor(first, self.object_names)
        elif atom.startswith(LOOK_AT):
            self._require_anchor(split_anchor(atom)[1], self.object_names | self.character_names)
        else:
            self._require_anchor(split_anchor(atom)[1], self.object_names)

    @staticmethod
    def _require_anchor(anchor: str, known: Collection[str]) -> None:
        if anchor not in known:
            raise PlanRejected(ErrorKind.UNKNOWN_ANCHOR, f"unavailable anchor {anchor!r}")

    # --- position and collision checks (docs/reference.md#position-check, #collision-check) --------------------
    def position_pass_mask(self, points: np.ndarray, expected: ExpectedPlan | None = None) -> np.ndarray:
        """bool (N,): where a PI plan standing at each point would pass (condition holds, no floor collision).
        Vectorised for parity lattices and the sampler; `expected` defaults to the case's first expected plan.
        A broken case raises PlanRejected."""
        target = expected if expected is not None else self.case.expected_plans[0]
        xy = np.asarray(points, dtype=np.float32).reshape(-1, 2)
        with np.errstate(all="ignore"):
            return self._condition_mask(target.sampled_position, xy) & ~floor_collisions(self.scene, xy)

    def _condition_mask(self, condition: str | list[float] | None, xy: np.ndarray) -> np.ndarray:
        if isinstance(condition, list):
            try:
                return area_box_mask(xy, condition)
            except ValueError as exc:
                raise PlanRejected(ErrorKind.MALFORMED_CONDITION, str(exc)) from None
        if not condition:
            return np.ones(len(xy), dtype=bool)
        return evaluate_condition(_parse(condition), lambda atom: _position_mask(self.scene, xy, atom))

    def _position_failure(self, expected: ExpectedPlan, entry: object) -> str | None:
        """None when the sampled position passes, else whether it missed the expected area or hit an object.

        The point is read once and both checks run once; the reason comes from the values the verdict used."""
        name = expected.character
        raw = _field(entry, "sampled_position", name)
        condition = expected.sampled_position
        point: np.ndarray | None = None
        holds = True
        with np.errstate(all="ignore"):  # NaN or infinite coordinates are judged, not warned about
            if isinstance(condition, list) or condition:  # an empty condition string holds without reading the point
                point = _as_float32(raw, name)
                if point.shape != (2,) and isinstance(condition, str):
                    # the reference meets the point only after the first atom's anchor and predicate passed
                    first_atom = next(iter_atoms(_parse(condition)))
                    _position_mask(self.scene, np.zeros((0, 2), dtype=np.float32), first_atom)
                _require_pair(point, name)
                holds = bool(self._condition_mask(condition, point.reshape(1, 2))[0])
            if point is None:
                point = _as_float32(raw, name)
                _require_pair(point, name)
            hit = int(first_collision(self.scene, point.reshape(1, 2))[0]) if holds else -1
        if holds and hit < 0:
            return None
        where = f"({float(point[0]):.2f}, {float(point[1]):.2f})"
        if not holds:
            return f"{name}: position {where} is not where {_shown_condition(condition)} holds"  # type: ignore[arg-type]
        return f"{name}: position {where} stands inside {self.scene.objects[hit].name}"


def _shown(items: Collection[Any]) -> str:
    """A plan's actions or relationships as a reason quotes them (a string stays a string: it was read by letter)."""
    return repr(items) if isinstance(items, str) else repr(list(items))


def _shown_condition(condition: str | list[float]) -> str:
    return f"area {condition}" if isinstance(condition, list) else repr(condition)


def _position_mask(scene: Scene, points: np.ndarray, atom: str) -> np.ndarray:
    try:
        return position_atom_mask(scene, points, atom)
    except KeyError:
        raise PlanRejected(ErrorKind.UNKNOWN_ANCHOR, f"unknown anchor in {atom!r}") from None
    except ValueError as exc:
        raise PlanRejected(ErrorKind.UNKNOWN_PREDICATE, f"{exc} in {atom!r}") from None


def _as_float32(raw: object, name: str) -> np.ndarray:
    """The plan's position as the evaluator sees it: whatever numpy makes of it as float32 (strings of digits and
    booleans convert, null becomes NaN)."""
    if type(raw) is list and len(raw) == 2 and type(raw[0]) is float and type(raw[1]) is float:
        return np.array(raw, dtype=np.float32)  # the usual plan: nothing to warn about but overflow, ignored here
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return np.array(raw, dtype=np.float32)
    except Exception as exc:  # numpy raises ValueError, TypeError or OverflowError depending on the shape
        raise PlanRejected(ErrorKind.MALFORMED_PLAN, f"sampled_position of {name} is not numeric ({exc})") from None


def _require_pair(point: np.ndarray, name: str) -> None:
    if point.shape != (2,):
        raise PlanRejected(ErrorKind.MALFORMED_PLAN, f"sampled_position of {name} is not an (x, y) pair")
