"""The five planning settings of the paper (docs/reference.md#planning-settings) as one table, plus the Table 1 / Table
2 run presets.

A variant is pure data: which description the prompts show, which prompt-pack files and example answers each module
uses, and whether JSON mode is requested. Two combinations cannot work with the official prompt pack
(docs/reference.md#impossible-combinations): w/o Event has no example answer for PI, and Direct Inference only has a PI
example. The reference turns every such run into an execution error; `Variant.unsupported_reason` names the problem so a
planner can do the same without calling the model, and the presets never ask for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from edsb.data.models import TAGS
from edsb.errors import UsageError
from edsb.settings.vocab import PresetName as PresetName
from edsb.settings.vocab import SamplerName as SamplerName
from edsb.settings.vocab import VariantName as VariantName

DescriptionType = Literal["narrative", "object_list", "scene_graph"]
PlanningMode = Literal["event", "no_event", "event_no_lcps"]
Module = Literal["narrator", "event_parser"]


@dataclass(frozen=True)
class ModulePrompt:
    """How one module of a variant is prompted: system file stem, example answer field, JSON mode."""

    module: Module
    system: str
    answer_field: str
    json_mode: bool
    # Example files (stems) this module accepts; None = any. Direct Inference's parser only has a PI answer.
    accepted_examples: frozenset[str] | None = None


@dataclass(frozen=True)
class Variant:
    name: str
    title: str
    description_type: DescriptionType
    planning_mode: PlanningMode
    narrator: ModulePrompt
    parser: ModulePrompt | None  # None: the Narrator's code is the plan (w/o Event)
    runnable_tags: frozenset[str]

    @property
    def uses_event_parser(self) -> bool:
        return self.parser is not None

    @property
    def samples_positions(self) -> bool:
        """PI plans get a sampled position from the relationships (all but Direct Inference, which writes one)."""
        return self.planning_mode != "event_no_lcps"

    @property
    def folder_suffix(self) -> str:
        """The reference's run-folder suffix, e.g. `narrative-event`."""
        return f"{self.description_type}-{self.planning_mode}"

    def unsupported_reason(self, tags: Iterable[str]) -> str | None:
        """Why a case with these tags cannot run in this variant (an execution error in the reference), or None."""
        missing = sorted(set(tags) - self.runnable_tags)
        if not missing:
            return None
        return f"{self.title} cannot plan {'/'.join(missing)} cases: the prompt pack has no matching example answer"


_NARRATOR_JSON = ModulePrompt("narrator", system="narrator", answer_field="response", json_mode=True)
_PARSER_LCPS = ModulePrompt("event_parser", system="event_parser", answer_field="response", json_mode=False)

VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(VariantName.OURS, "Ours", "narrative", "event", _NARRATOR_JSON, _PARSER_LCPS, frozenset(TAGS)),
        Variant(
            VariantName.WO_EVENT,
            "w/o Event",
            "narrative",
            "no_event",
            ModulePrompt("narrator", system="narrator_wo_event", answer_field="response_wo_event", json_mode=False),
            None,
            frozenset({"OA", "RC", "SS"}),
        ),
        Variant(
            VariantName.OBJECT_LIST,
            "Object List",
            "object_list",
            "event",
            _NARRATOR_JSON,
            _PARSER_LCPS,
            frozenset(TAGS),
        ),
        Variant(
            VariantName.SCENE_GRAPH,
            "Scene Graph",
            "scene_graph",
            "event",
            _NARRATOR_JSON,
            _PARSER_LCPS,
            frozenset(TAGS),
        ),
        Variant(
            VariantName.DIRECT,
            "Direct Inference",
            "scene_graph",
            "event_no_lcps",
            _NARRATOR_JSON,
            ModulePrompt(
                "event_parser",
                system="event_parser_wo_lcps",
                answer_field="response_wo_lcps",
                json_mode=False,
                accepted_examples=frozenset({"PI"}),
            ),
            frozenset({"PI"}),
        ),
    )
}


def get_variant(name: str) -> Variant:
    """A variant by name; `wo_event`-style spellings (as in the reference hash table) are accepted too."""
    key = name.strip().lower().replace("_", "-")
    try:
        return VARIANTS[key]
    except KeyError:
        raise UsageError(f"unknown variant {name!r} (expected one of {', '.join(VARIANTS)})") from None


@dataclass(frozen=True)
class Preset:
    """A named experiment grid; `cases` uses the case-selection syntax of `edsb.data.selection`."""

    name: str
    cases: str
    variants: tuple[str, ...]
    levels: tuple[int, ...]
    repeats: int


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            PresetName.TABLE1,
            cases="OA,RC,SS",
            variants=("ours", "wo-event", "object-list", "scene-graph"),
            levels=(0, 1, 2),
            repeats=5,
        ),
        Preset(PresetName.TABLE2, cases="PI", variants=("scene-graph", "direct"), levels=(0,), repeats=5),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name.strip().lower()]
    except KeyError:
        raise UsageError(f"unknown preset {name!r} (expected one of {', '.join(PRESETS)})") from None
