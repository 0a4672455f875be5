"""Typed views of the official benchmark files (test cases, scene annotations, grid settings).

Field names follow the files so that a case can be written back unchanged; strict types make a corrupt file fail
at load time, naming the field, instead of deep inside a run.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

Tag = Literal["OA", "PI", "RC", "SS"]


class TagName(StrEnum):
    """The four tags, in the paper's column order (objects & actions, relationships & contexts, ...)."""

    OA = "OA"
    RC = "RC"
    SS = "SS"
    PI = "PI"


class SceneName(StrEnum):
    """The three scenes, in the reference's loop order."""

    HOUSE = "House"
    OFFICE = "Office"
    RESTAURANT = "Restaurant"


TAGS: tuple[TagName, ...] = tuple(TagName)
SCENES: tuple[str, ...] = tuple(SceneName)
Number = StrictFloat | StrictInt


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class PlanDetail(_Model):
    """One character's part of a past plan (history entries of cases and of the prompt pack's examples)."""

    character: StrictStr
    target_action: StrictStr
    position: list[StrictStr]
    orientation: list[StrictStr] = []

    @property
    def relationships(self) -> list[str]:
        return [*self.position, *self.orientation]


class CharacterSnapshot(_Model):
    """A character as cases and prompt examples describe it now: state, current action, relationships."""

    name: StrictStr
    state: StrictStr
    current_action: StrictStr
    position: list[StrictStr]
    orientation: list[StrictStr]

    @property
    def relationships(self) -> list[str]:
        return [*self.position, *self.orientation]


class _Filtered(_Model):
    type: Literal["essential", "distractor"]
    distraction_level: StrictInt = Field(ge=0)

    def kept_at(self, level: int) -> bool:
        return self.type == "essential" or self.distraction_level <= level


class HistoryEntry(_Filtered):
    idx: StrictInt
    state: StrictStr
    characters: list[StrictStr]
    activity: StrictStr
    details: list[PlanDetail]


class CharacterState(_Filtered, CharacterSnapshot):
    idx: StrictInt


class ExpectedPlan(_Model):
    character: StrictStr
    target_action: StrictStr | None = None
    relationships: StrictStr | None = None
    # A condition string, or an area box [min_x, min_y, max_x, max_y] (accepted by the evaluator, used by no case).
    sampled_position: StrictStr | list[Number] | None = None


class TestCase(_Model):
    __test__ = False  # not a pytest class

    id: StrictInt
    tags: list[Tag] = Field(min_length=1)
    scene_name: Literal["House", "Office", "Restaurant"]
    action_labels: list[StrictStr]
    user_instruction: StrictStr
    planning_history: list[HistoryEntry]
    current_states: list[CharacterState]
    expected_plans: list[ExpectedPlan] = Field(min_length=1)
    allow_null_plan: StrictBool

    @property
    def max_distraction(self) -> int:
        levels = [e.distraction_level for e in (*self.planning_history, *self.current_states)]
        return max(levels, default=0)

    @property
    def is_position_case(self) -> bool:
        return "PI" in self.tags

    def states_at(self, level: int) -> list[CharacterState]:
        return [s for s in self.current_states if s.kept_at(level)]

    def history_at(self, level: int) -> list[HistoryEntry]:
        return [h for h in self.planning_history if h.kept_at(level)]


class SceneObjectRecord(_Model):
    """One entry of `objects.json`: an oriented box plus seat metadata."""

    id: StrictInt
    label: StrictStr
    idx: StrictInt
    aa_extents: list[Number] = Field(min_length=3, max_length=3)
    orientation: list[Number] = Field(min_length=3, max_length=3)
    has_orientation: StrictBool
    width: Number
    depth: Number
    height: Number
    center: list[Number] = Field(min_length=3, max_length=3)
    bbox: list[list[Number]] = Field(min_length=8, max_length=8)
    sit_offset_horizontal: Number
    sit_offset_vertical: Number

    @property
    def name(self) -> str:
        return "_".join((self.label, str(self.idx)))


class SceneBounds(_Model):
    """`scene.json`: only `bbox` matters without meshes (the sampler's boundary)."""

    bbox: list[list[Number]] = Field(min_length=2, max_length=2)


class GridSettings(_Model):
    """`grid_map.json`: occupancy-grid step, sampler margins and the character cylinder."""

    grid_step: Number
    x_margin: Number
    y_margin: Number
    z_margin: Number
    cylinder_radius: Number
    cylinder_height: Number
    user_modifications: dict[Literal["occupied", "unoccupied"], list[list[StrictInt]]]
