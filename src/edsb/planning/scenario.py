"""Everything one run plans from (docs/reference.md#run-set-up): kept characters, the event history, availability, the
scene description.

The same assembly serves the test cases and the few-shot examples of the prompt pack, so example queries and live
queries are built from identical structures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from edsb.geometry.relations import POSTURES
from edsb.planning.narrator import event_label, normalise_activity
from edsb.planning.variants import DescriptionType, Variant, get_variant
from edsb.results import ErrorKind, RunError
from edsb.sandbox import LatestPlan

MOVING_STATES = frozenset({"approaching", "transition_in", "transition_out"})  # never offered, never an error


class CharacterStateError(RunError, ValueError):
    kind = ErrorKind.CHARACTER_STATE


def main_action(actions: Sequence[str]) -> str:
    """The action a prompt shows for a list: the only one, else the first that is not a posture (sit/lie)."""
    if len(actions) <= 1:
        return actions[0] if actions else ""
    return next((a for a in actions if not a.startswith(("sit", "lie"))), actions[0])


@dataclass(frozen=True)
class Character:
    name: str
    state: str  # as in the case: `idle` or `interacting`
    actions: tuple[str, ...]  # the current action, plus `sit` / `lie` when a relationship implies the posture
    relationships: tuple[str, ...]  # position strings, then orientation strings
    current_event: int | None = None  # index in the history of the event this character is busy with

    @property
    def main_action(self) -> str:
        return main_action(self.actions)


@dataclass(frozen=True)
class PlannedDetails:
    """One character's parsed plan inside a history event."""

    target_action: tuple[str, ...]
    relationships: tuple[str, ...]


@dataclass(frozen=True)
class HistoryEvent:
    characters: tuple[str, ...]  # kept characters it names, in `current_states` order
    activity: str  # trailing periods removed
    state: str  # `completed`, `ongoing` or `looping`
    details: Mapping[str, PlannedDetails] = field(default_factory=dict)  # by character, in file order

    @property
    def label(self) -> str:
        """`[Ann, Bob] chat at table_1`, the form both prompts use."""
        return event_label(self.characters, self.activity)


# --- assembly, shared by cases and prompt-pack examples --------------------------------------------------------------
class _StateLike(Protocol):
    name: str
    state: str
    current_action: str

    @property
    def relationships(self) -> list[str]: ...


class _DetailLike(Protocol):
    character: str
    target_action: str

    @property
    def relationships(self) -> list[str]: ...


class _EntryLike(Protocol):
    characters: list[str]
    activity: str
    state: str

    @property
    def details(self) -> Sequence[_DetailLike]: ...


def cast_and_history(
    states: Iterable[_StateLike],
    entries: Iterable[_EntryLike],
    *,
    add_postures: bool,
    names_from_cast: bool,
) -> tuple[tuple[Character, ...], tuple[HistoryEvent, ...]]:
    """Characters and history events with each character's current event resolved (later entries win).

    `add_postures`: append `sit` / `lie` to the actions as a run does (examples do not).
    `names_from_cast`: an event names the cast members it lists, in cast order (runs); otherwise the listed names
    verbatim (examples).
    """
    states = list(states)
    current: dict[str, int | None] = {s.name: None for s in states}
    history: list[HistoryEvent] = []
    for index, entry in enumerate(entries):
        if names_from_cast:
            names = tuple(s.name for s in states if s.name in entry.characters)
        else:
            names = tuple(entry.characters)
        details = {
            d.character: PlannedDetails(target_action=(d.target_action,), relationships=tuple(d.relationships))
            for d in entry.details
        }
        history.append(HistoryEvent(names, normalise_activity(entry.activity), entry.state, details))
        for s in states:
            if s.name in entry.characters:
                current[s.name] = None if entry.state == "completed" else index
    cast = []
    for s in states:
        relationships = tuple(s.relationships)
        actions = [s.current_action]
        if add_postures:
            actions += [
                posture for prefix, posture in POSTURES.items() if any(r.startswith(prefix) for r in relationships)
            ]
        cast.append(Character(s.name, s.state, tuple(actions), relationships, current[s.name]))
    return tuple(cast), tuple(history)


def available_characters(characters: Iterable[Character], history: Sequence[HistoryEvent]) -> list[Character]:
    """Characters the Narrator may use: idle and in no event, or interacting in a looping event."""
    available = []
    for character in characters:
        if character.state in MOVING_STATES:
            continue
        event = history[character.current_event] if character.current_event is not None else None
        if character.state == "idle":
            if event is None:
                available.append(character)
        elif character.state == "interacting":
            if event is not None and event.state == "looping":
                available.append(character)
        else:
            raise CharacterStateError(f"invalid character state {character.state!r} for {character.name}")
    return available


def latest_plans(history: Iterable[HistoryEvent]) -> dict[str, LatestPlan]:
    """Per character named in any event's details, its last details and that event's state (first-seen order)."""
    plans: dict[str, LatestPlan] = {}
    for event in history:
        for name, details in event.details.items():
            plans[name] = LatestPlan(main_action(details.target_action), details.relationships, event.state)
    return plans


# --- descriptions -----------------------------------------------------------------------------------------------------
_rendered: dict[tuple[str, int, str, str], str] = {}


def scene_description(benchmark: Benchmark, scene: str, description_type: DescriptionType, repeat: int) -> str:
    """The description a run shows: narrative file number `repeat`, or the object list / scene graph of the scene."""
    if description_type == "narrative":
        return benchmark.narrative_description(scene, repeat)
    key = (str(benchmark.resolved_root), benchmark.perturb, scene, description_type)
    if key not in _rendered:
        from edsb.geometry.scene import load_scene
        from edsb.geometry.scene_text import object_list_text, scene_graph_text

        loaded = load_scene(benchmark, scene)
        _rendered[key] = object_list_text(loaded) if description_type == "object_list" else scene_graph_text(loaded)
    return _rendered[key]


# --- the run ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """One run's inputs: the case at a distraction level, the repeat index and the variant."""

    case: TestCase
    level: int
    repeat: int
    variant: Variant
    characters: tuple[Character, ...]  # kept `current_states`, file order
    history: tuple[HistoryEvent, ...]  # kept `planning_history`, chronological
    description: str

    @property
    def scene_name(self) -> str:
        return self.case.scene_name

    @property
    def action_labels(self) -> list[str]:
        return self.case.action_labels

    @property
    def character_names(self) -> list[str]:
        return [c.name for c in self.characters]

    @cached_property
    def available_characters(self) -> list[Character]:
        return available_characters(self.characters, self.history)

    @cached_property
    def latest_plans(self) -> dict[str, LatestPlan]:
        """What the code API's occupancy test reads: each character's latest history plan and its event state."""
        return latest_plans(self.history)


_casts: dict[tuple[int, int], tuple[TestCase, tuple[Character, ...], tuple[HistoryEvent, ...]]] = {}


def _case_cast(case: TestCase, level: int) -> tuple[tuple[Character, ...], tuple[HistoryEvent, ...]]:
    """A case's characters and history at a level, assembled once: every variant and repeat shares them (frozen)."""
    cached = _casts.get((id(case), level))
    if cached is None or cached[0] is not case:  # the case itself is kept, so its id cannot be reused meanwhile
        cast = cast_and_history(case.states_at(level), case.history_at(level), add_postures=True, names_from_cast=True)
        cached = _casts[(id(case), level)] = (case, *cast)
    return cached[1], cached[2]


def build_scenario(
    benchmark: Benchmark, case: TestCase | int, level: int, repeat: int, variant: Variant | str
) -> Scenario:
    """Set up a run as the reference does (docs/reference.md#run-set-up). A missing narrative description (repeat >= 5)
    raises DataError."""
    case = benchmark.case(case) if isinstance(case, int) else case
    variant = get_variant(variant) if isinstance(variant, str) else variant
    characters, history = _case_cast(case, level)
    description = scene_description(benchmark, case.scene_name, variant.description_type, repeat)
    return Scenario(case, level, repeat, variant, characters, history, description)
