"""The spatial code API that model-written plan code calls (docs/reference.md#code-api), with the reference's semantics
and quirks.

Every function of the official Event Parser prompt is here under its advertised name, plus the reference's
callable-but-unadvertised `get_objects_adjacent_to`. Answers come from `edsb.geometry` (scene order, the scene
graph in the reference's listing order, footprint distances); nothing here re-derives a relation.

Kept quirks (they decide verdicts): area functions never check their anchors; label filters accept `label[:-1]`
(docs/reference.md#plural-labels); `get_object_supporting` returns an object handle rather than a name, which some
functions accept and others reject with KeyError (docs/reference.md#object-handles); `is_object_occupied` only ever
finds seats (docs/reference.md#is_object_occupied); the `behind` / `left of` / `right of` queries return [] for unknown
anchors while `in front of` and `supported by` assert.

`get_objects_between` is the reference's too, bug included (docs/reference.md#get_objects_between): it reads a threshold
that is never set, so it raises AttributeError at the first object (the anchors included) whose centre projects inside
the segment between the anchors' centres; it returns [] only when the label filter leaves no such object. The query it
was meant to be is documented in docs/known-issues.md.

Model code reaches this module only through the sandbox, which refuses underscore attributes: everything internal
is underscore-named, and handles carry no public reference to the API.

Every operation on a value the model passed (a name lookup, a label slice, formatting, a comparison) and every
deliberate error runs under `MODEL_OPERATION` or is raised through `caused_by_model`: that is where the model's
mistakes surface, with the reference's exception. An exception raised anywhere else here is a fault of edsb
(`edsb.sandbox.restricted.blame` reads the marks of `edsb.sandbox.provenance`), so keep model values out of
unmarked code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from edsb.geometry.boxes import Box
from edsb.geometry.distances import footprint_distance_matrix
from edsb.geometry.relations import (
    ADJACENT_TO,
    ALIGNED_WITH,
    BEHIND,
    BETWEEN,
    CLOSE_TO,
    IN_FRONT_OF,
    LEFT_OF,
    LIE_ON,
    LOOK_AT,
    ON,
    RIGHT_OF,
    SIT_ON,
)
from edsb.geometry.scene import Scene
from edsb.geometry.scene_graph import SceneGraph, scene_graph_of
from edsb.sandbox.provenance import MODEL_OPERATION, caused_by_model

# --- what the API reads: the scene and the history --------------------------------------------------------------------


class ApiScene:
    """A scene prepared for the API: objects in scene order, each one's outgoing graph edges in the reference's
    listing order, and the footprint distance of every ordered pair. Built once per scene and shared read-only."""

    def __init__(self, scene: Scene, graph: SceneGraph | None = None) -> None:
        graph = scene_graph_of(scene) if graph is None else graph
        self.name = scene.name
        self.objects: tuple[Box, ...] = scene.objects
        self.by_name: Mapping[str, Box] = scene.by_name
        self._position = {box.id: i for i, box in enumerate(self.objects)}
        self.edges: Mapping[str, tuple[tuple[Box, str], ...]] = {
            box.name: tuple((self.by_name[e.anchor], e.predicate) for e in graph.edges_from(box.name))
            for box in self.objects
        }
        self._gaps = footprint_distance_matrix(self.objects)

    def gap(self, target: Box, anchor: Box) -> float:
        """S(target, anchor) (docs/reference.md#distances), as the graph uses it."""
        return float(self._gaps[self._position[target.id], self._position[anchor.id]])


@dataclass(frozen=True)
class LatestPlan:
    """A character's details in the last history event that has them, with that event's state (read by
    `is_object_occupied`)."""

    target_action: str  # main action label
    relationships: tuple[str, ...]
    state: str


# --- values handed to model code --------------------------------------------------------------------------------------


class Area:
    """A region as a list of condition strings (`sit on chair_1`); model code may build and edit one."""

    __slots__ = ("conditions",)

    def __init__(self, conditions: list[Any] | None = None) -> None:
        self.conditions = [] if conditions is None else conditions

    def __repr__(self) -> str:
        with MODEL_OPERATION:  # the conditions are the model's values
            return f"Area(conditions={self.conditions!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not Area:
            return NotImplemented
        with MODEL_OPERATION:
            return bool(self.conditions == other.conditions)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the reference's dataclass


class SceneObject:
    """An object as `get_object_supporting` returns it: prints as its name and equals its name, but is not a
    string, so name-keyed lookups (`get_closest_object`, `get_distance_between`, ...) raise KeyError on it."""

    __slots__ = ("_box",)
    _box: Box  # set once in __init__ (the class refuses attribute writes)

    def __init__(self, box: Box) -> None:
        object.__setattr__(self, "_box", box)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"'SceneObject' object attribute '{name}' is read-only")

    @property
    def id(self) -> int:
        return self._box.id

    @property
    def label(self) -> str:
        return self._box.label

    @property
    def idx(self) -> int:
        return self._box.idx

    def __repr__(self) -> str:
        return self._box.name

    def __eq__(self, other: object) -> bool:
        return _is_same_object(self._box, other)

    def __hash__(self) -> int:
        return hash(self._box.id)


def _is_same_object(box: Box, value: object) -> bool:
    """The reference's object equality: by id against an object, by name against a string, an error otherwise."""
    if isinstance(value, SceneObject):
        return box.id == value._box.id
    if isinstance(value, str):
        return box.name == value
    # The model compared an object with something else: the reference's comparison raises the same.
    raise caused_by_model(NotImplementedError(f"a scene object cannot be compared with {type(value).__name__}"))


class CharacterHandle:
    """The handle `get_character` returns; its setters write the character's entry of the plan.

    Model code sees it under the reference's class name, `Character` (in messages such as "'Character' object has
    no attribute ..."); here it is `CharacterHandle`, apart from the cast's `planning.scenario.Character`.
    """

    __slots__ = ("_api", "name")
    _api: CodeApi  # both set once in __init__ (the class refuses attribute writes)
    name: Any

    def __init__(self, name: Any, api: CodeApi) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_api", api)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"'Character' object attribute '{name}' is read-only")

    def __repr__(self) -> str:
        with MODEL_OPERATION:  # the name is whatever the model passed to `get_character`
            return f"Character(name={self.name!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not CharacterHandle:
            return NotImplemented
        with MODEL_OPERATION:
            same = bool(self.name == other.name)
        return same and self._api is other._api

    __hash__ = None  # type: ignore[assignment]

    def set_position(self, position: Any) -> None:
        """An Area stores its (live) condition list; a list or tuple is stored as given (raw coordinates,
        docs/reference.md#raw-positions)."""
        entry = self._api._entry(self.name)
        if isinstance(position, list | tuple):
            entry.position = position
        elif isinstance(position, Area):
            with MODEL_OPERATION:  # the model may have deleted them (`del area.conditions`)
                entry.position = position.conditions
        else:  # the model passed something else: the reference raises the same
            raise caused_by_model(ValueError(f"set_position expects an Area or a list, not {type(position)}"))

    def set_orientation(self, target: Any) -> None:
        orientation = [_condition(LOOK_AT, target)]  # formatted first, as the reference's assignment does
        self._api._entry(self.name).orientation = orientation

    def set_target_action(self, action: Any) -> None:
        self._api._entry(self.name).target_action = action


CharacterHandle.__name__ = CharacterHandle.__qualname__ = "Character"  # the name model code and its messages show


class PlanEntry:
    """One character's entry while the code runs: exactly what the setters stored, aliasing included."""

    __slots__ = ("character", "orientation", "position", "target_action")

    def __init__(self, character: Any) -> None:
        self.character = character
        self.position: Any = []
        self.target_action: Any = ""
        self.orientation: list[str] | None = None


#: What the reference raises where `get_objects_between` reads its threshold (docs/reference.md#get_objects_between).
_MISSING_THRESHOLD = "'CodeExecutor' object has no attribute 'between_threshold'"


# --- the API ----------------------------------------------------------------------------------------------------------


def _accepted_labels(label: Any) -> tuple[Any, Any] | None:
    """The reference's label filter, worked out once per call: None (no label) keeps every object; otherwise an
    object's label must be `label` or `label[:-1]` (plural, docs/reference.md#plural-labels). The reference evaluates it
    at each object, first thing, so call it only when there is at least one object to filter: with none, a bad label
    raises nothing."""
    with MODEL_OPERATION:  # `label` is the model's: slicing an int raises TypeError there too
        if not label:
            return None
        accepted = (label, label[:-1])
    if type(label) is str:
        return accepted
    return _ModelLabels(accepted)  # compared with each object's label under MODEL_OPERATION


class _ModelLabels(tuple[Any, Any]):
    """Accepted labels that are not plain strings (a numpy array, say): `box.label in accepted` compares the
    model's values, and fails as the model's operation, as the reference's comparison does."""

    __slots__ = ()

    def __contains__(self, label: object) -> bool:
        for value in self:  # a plain loop: the comparison must fail in this frame, under the mark
            with MODEL_OPERATION:
                if value is label or bool(value == label):
                    return True
        return False


def _condition(predicate: str, anchor: Any, second: Any = None, *, pair: bool = False) -> str:
    """`adjacent to X` (or `between X and Y`) from the model's values, formatted as the reference's f-strings do."""
    with MODEL_OPERATION:  # formatting fails on some of the model's values (an int over 4300 digits) there too
        return f"{predicate} {anchor} and {second}" if pair else f"{predicate} {anchor}"


class CodeApi:
    """The object bound to `self` in rewritten plan code: one instance per run.

    Parameter names follow the reference (so keyword calls succeed or fail as there), not the prompt's wording.
    """

    def __init__(self, scene: ApiScene, latest_plans: Mapping[str, LatestPlan] | None = None) -> None:
        self._scene = scene
        self._latest = dict(latest_plans or {})
        self._entries: dict[Any, PlanEntry] = {}

    def _entry(self, character: Any) -> PlanEntry:
        with MODEL_OPERATION:  # an unhashable name given to `get_character` fails here, as in the reference
            known = character in self._entries
        if not known:
            self._entries[character] = PlanEntry(character)
        return self._entries[character]

    def _plan_entries(self) -> list[PlanEntry]:
        return list(self._entries.values())

    def _box(self, name: Any) -> Box:
        """The object called `name`, looked up as the reference's dict: KeyError for an unknown name or a handle,
        TypeError for an unhashable value."""
        with MODEL_OPERATION:  # the name is the model's
            return self._scene.by_name[name]

    def _edges_of(self, anchor: Any) -> tuple[tuple[Box, str], ...]:
        """Outgoing edges of a name (KeyError if unknown) or of anything else by its text (none if not a name)."""
        if isinstance(anchor, str):
            return self._scene.edges[self._box(anchor).name]
        with MODEL_OPERATION:
            text = str(anchor)
        return self._scene.edges.get(text, ())

    def _require_object(self, anchor: Any) -> None:
        if not any(_is_same_object(box, anchor) for box in self._scene.objects):
            with MODEL_OPERATION:
                message = f"{anchor} is not an object in the scene"
            raise caused_by_model(AssertionError(message))  # the model named no object: the reference asserts

    def _objects_with_edge_to(self, anchor: Any, predicate: str, label: Any, *, skip_anchor: bool = False) -> list[str]:
        found = []
        objects = self._scene.objects
        accepted = _accepted_labels(label) if objects else None
        for box in objects:
            if accepted is not None and box.label not in accepted:
                continue
            if skip_anchor and _is_same_object(box, anchor):
                continue
            for target, edge_predicate in self._scene.edges[box.name]:
                if edge_predicate == predicate and _is_same_object(target, anchor):
                    found.append(box.name)
        return found

    def _edge_targets(self, anchor: Any, predicates: tuple[str, ...], label: Any) -> list[str]:
        found = []
        edges = self._edges_of(anchor)
        accepted = _accepted_labels(label) if edges else None
        for target, predicate in edges:
            if accepted is not None and target.label not in accepted:
                continue
            if predicate in predicates:
                found.append(target.name)
        return found

    # --- characters ---------------------------------------------------------------------------------------------------
    def get_character(self, name: Any) -> CharacterHandle:
        """Any value is accepted; the plan entry appears at the first setter call."""
        return CharacterHandle(name, self)

    # --- areas (no anchor validation) ---------------------------------------------------------------------------------
    def get_area_to_interact_with(self, anchor: Any) -> Area:
        return Area([_condition(ADJACENT_TO, anchor)])

    def get_area_to_sit_on(self, anchor: Any) -> Area:
        return Area([_condition(SIT_ON, anchor)])

    def get_area_adjacent_to(self, anchor: Any) -> Area:
        return Area([_condition(ADJACENT_TO, anchor)])

    def get_area_close_to(self, anchor: Any) -> Area:
        return Area([_condition(CLOSE_TO, anchor)])

    def get_area_in_front_of(self, anchor: Any) -> Area:
        return Area([_condition(IN_FRONT_OF, anchor)])

    def get_area_behind(self, anchor: Any) -> Area:
        return Area([_condition(BEHIND, anchor)])

    def get_area_left_of(self, anchor: Any) -> Area:
        return Area([_condition(LEFT_OF, anchor)])

    def get_area_right_of(self, anchor: Any) -> Area:
        return Area([_condition(RIGHT_OF, anchor)])

    def get_area_between(self, anchor_1: Any, anchor_2: Any) -> Area:
        return Area([_condition(BETWEEN, anchor_1, anchor_2, pair=True)])

    def get_area_aligned_with(self, anchor_1: Any, anchor_2: Any) -> Area:
        return Area([_condition(ALIGNED_WITH, anchor_1, anchor_2, pair=True)])

    def get_intersected_area(self, area_1: Any, area_2: Any) -> Area:
        """Both condition lists, concatenated (anything without `.conditions` raises AttributeError)."""
        with MODEL_OPERATION:  # the areas, or what the model put in them, are the model's
            conditions = area_1.conditions + area_2.conditions
        return Area(conditions)

    # --- object queries -----------------------------------------------------------------------------------------------
    def get_object_supporting(self, anchor: Any) -> SceneObject | None:
        """The target of the anchor's first `on` edge, as an object handle (not a name,
        docs/reference.md#object-handles), or None."""
        self._require_object(anchor)
        for target, predicate in self._edges_of(anchor):
            if predicate == ON:
                return SceneObject(target)
        return None

    def get_objects_supported_by(self, anchor: Any, label: Any = None) -> list[str]:
        self._require_object(anchor)
        return self._objects_with_edge_to(anchor, ON, label, skip_anchor=True)

    def get_objects_in_front_of(self, anchor: Any, label: Any = None) -> list[str]:
        self._require_object(anchor)
        return self._objects_with_edge_to(anchor, IN_FRONT_OF, label)

    def get_objects_behind(self, anchor: Any, label: Any = None) -> list[str]:
        return self._objects_with_edge_to(anchor, BEHIND, label)

    def get_objects_left_of(self, anchor: Any, label: Any = None) -> list[str]:
        return self._objects_with_edge_to(anchor, LEFT_OF, label)

    def get_objects_right_of(self, anchor: Any, label: Any = None) -> list[str]:
        return self._objects_with_edge_to(anchor, RIGHT_OF, label)

    def get_objects_close_to(self, anchor: Any, label: Any = None) -> list[str]:
        """Targets of the anchor's `close to` and `adjacent to` edges, in edge order."""
        return self._edge_targets(anchor, (CLOSE_TO, ADJACENT_TO), label)

    def get_objects_adjacent_to(self, anchor: Any, label: Any = None) -> list[str]:
        return self._edge_targets(anchor, (ADJACENT_TO,), label)

    def get_objects_associated_with(self, anchor: Any, label: Any = None) -> list[str]:
        """Objects close to the anchor whose closest object of the anchor's label is the anchor itself."""
        anchor_label = self._box(anchor).label
        return [
            name
            for name in self.get_objects_close_to(anchor, label=label)
            if anchor == self._closest(self._scene.by_name[name], anchor_label)
        ]

    def get_objects_between(self, anchor_1: Any, anchor_2: Any, label: Any = None) -> list[str]:
        """[], or the reference's AttributeError once an object's centre projects inside the anchors' segment
        (docs/reference.md#get_objects_between)."""
        first, second = self._box(anchor_1), self._box(anchor_2)
        start = first.center[:2]
        segment = second.center[:2] - start
        length = np.linalg.norm(segment)
        accepted = _accepted_labels(label)  # the scene holds at least the anchors
        for box in self._scene.objects:
            if accepted is not None and box.label not in accepted:
                continue
            t = np.dot(segment, box.center[:2] - start) / (length * length + 1e-12)
            if 0 <= t <= 1:  # the reference then compares with its missing threshold
                raise caused_by_model(AttributeError(_MISSING_THRESHOLD))
        return []

    def get_closest_object(self, anchor: Any, label: Any = None) -> str:
        """The object nearest the anchor by footprint distance (first in scene order on ties); `"None"` if none."""
        return self._closest(self._box(anchor), label)

    def _closest(self, origin: Box, label: Any) -> str:
        closest: Box | None = None
        best = float("inf")
        accepted = _accepted_labels(label)  # the scene holds at least the origin
        for box in self._scene.objects:
            if accepted is not None and box.label not in accepted:
                continue
            if box.id == origin.id:
                continue
            gap = self._scene.gap(origin, box)
            if gap < best:
                best, closest = gap, box
        return str(None) if closest is None else closest.name

    # --- utilities ----------------------------------------------------------------------------------------------------
    def get_distance_between(self, anchor_1: Any, anchor_2: Any) -> float:
        return self._scene.gap(self._box(anchor_1), self._box(anchor_2))

    def is_object_occupied(self, obj: Any) -> bool:
        """True if some character's latest history plan sits or lies on `obj`, whatever that event's state.

        The reference's second test (someone using the object) iterates the letters of the action label and so never
        succeeds; what survives of it is its lookup, which raises KeyError when a plan that is not completed is
        `adjacent to` / `close to` something that is not an object, e.g. a character
        (docs/reference.md#is_object_occupied).
        """
        for plan in self._latest.values():
            for relationship in plan.relationships:
                if relationship.startswith((SIT_ON, LIE_ON)):
                    with MODEL_OPERATION:  # compared with the model's value (an array's truth value fails here)
                        seated = bool(relationship.split()[-1] == obj)
                    if seated:
                        return True
        for plan in self._latest.values():
            if plan.state == "completed":
                continue
            for relationship in plan.relationships:
                if relationship.startswith((ADJACENT_TO, CLOSE_TO)):
                    # The reference's lookup fails the model's call here (a pending plan next to a character): its
                    # KeyError is an execution error of the run, so it is the model's.
                    with MODEL_OPERATION:
                        box = self._scene.by_name[relationship.split()[-1]]
                    _is_same_object(box, obj)  # may raise like the reference's comparison; its result never counts
        return False

    def is_object_of_label(self, obj: Any, label: Any) -> bool:
        box = self._box(obj)
        with MODEL_OPERATION:  # compared with the model's value
            return bool(label == box.label)


#: The callable names of the API, as model code writes them (the rewrite turns each into `self.<name>`).
API_FUNCTIONS: tuple[str, ...] = tuple(
    sorted(name for name, value in vars(CodeApi).items() if callable(value) and not name.startswith("_"))
)
