"""The official prompt pack (system messages, few-shot examples, sample descriptions), read from the data dir.

The texts are never part of this repository: they are loaded at run time, once per data directory.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, overload

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from edsb.data.benchmark import PROMPTS_DIR, Benchmark
from edsb.data.manifest import verified_optional
from edsb.data.models import CharacterSnapshot, PlanDetail
from edsb.errors import DataError, validation_message
from edsb.planning.variants import DescriptionType, Module, PlanningMode

SYSTEM_FILES: dict[str, str] = {
    "narrator": "narrator/system_messages/narrator.txt",
    "narrator_wo_event": "narrator/system_messages/narrator_wo_event.txt",
    "event_parser": "event_parser/system_messages/event_parser.txt",
    "event_parser_wo_lcps": "event_parser/system_messages/event_parser_wo_lcps.txt",
}
SAMPLE_DESCRIPTIONS_DIR = "scene_describer/sample_descriptions"

# Cases with `allow_null_plan` get one more Narrator guideline line. The reference writes it in its runner code,
# not in the prompt pack, so edsb reads it from that file when the data directory holds it (`edsb data fetch` keeps
# it, pinned); otherwise it uses this wording of its own, and case 21's Narrator system message then differs from
# the reference's (every other prompt is byte-identical).
NULL_PLAN_GUIDELINE = (
    "- When the characters the story needs next are all busy, you may answer with an empty event that names no"
    " characters: it skips this turn, and the next event waits until those characters are free."
)
RUNNER_FILE = "benchmark/runner.py"
GUIDELINE_ATTRIBUTE = "additional_guidelines"


def guideline_from_runner(source: str) -> str | None:
    """The text the runner appends to the Narrator's extra guidelines, read from its source without running it:
    the string constants of the `... += "..."` statements whose target attribute is the guidelines field."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    pieces = [
        node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AugAssign)
        and isinstance(node.target, ast.Attribute)
        and node.target.attr == GUIDELINE_ATTRIBUTE
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    return "".join(pieces) or None


def _load_null_plan_guideline(root: Path) -> tuple[str, str]:
    """(text, source): `reference` when read from the pinned runner file, `edsb` for our own wording."""
    path = verified_optional(root, RUNNER_FILE)
    text = guideline_from_runner(path.read_text(encoding="utf-8")) if path else None
    return (text, "reference") if text else (NULL_PLAN_GUIDELINE, "edsb")


def null_plan_guideline(planning_mode: PlanningMode, text: str = NULL_PLAN_GUIDELINE) -> str:
    """The extra Narrator guideline for cases that accept an empty plan; w/o Event speaks of plans, not events."""
    if planning_mode == "no_event":
        return text.replace("event", "plan")
    return text


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


# Characters and past plans of the examples have the shape of the test cases' own.
ExampleCharacter = CharacterSnapshot
ExamplePlan = PlanDetail


class ExampleEvent(_Model):
    """A past event of an example; field names match the test cases' history entries."""

    state: StrictStr
    characters: list[StrictStr]
    activity: StrictStr
    details: list[ExamplePlan] = Field(alias="parsed")


class ExampleNarration(_Model):
    reasoning: StrictStr
    characters: list[StrictStr]
    activity: StrictStr


class ExampleEventToParse(_Model):
    characters: list[StrictStr]
    activity: StrictStr


class NarratorExample(_Model):
    """One `narrator/examples/<TAG>.yaml`; `response_wo_event` is absent from PI.yaml."""

    stem: StrictStr
    scene_name: StrictStr
    action_labels: list[StrictStr]
    user_instruction: StrictStr | None = None
    characters: list[ExampleCharacter]
    previous_events: list[ExampleEvent]
    response: ExampleNarration
    response_wo_event: StrictStr | None = None


class ParserExample(_Model):
    """One `event_parser/examples/<TAG>.yaml`; `response_wo_lcps` exists only in PI.yaml."""

    stem: StrictStr
    scene_name: StrictStr
    action_labels: list[StrictStr]
    event: ExampleEventToParse
    characters: list[ExampleCharacter]
    previous_events: list[ExampleEvent]
    response: StrictStr
    response_wo_lcps: StrictStr | None = None


E = TypeVar("E", NarratorExample, ParserExample)


@dataclass(frozen=True)
class PromptPack:
    root: Path
    system_texts: dict[str, str]  # stem -> file text, stripped
    narrator_examples: tuple[NarratorExample, ...]  # every `<module>/examples/*.yaml`, in file-name order
    parser_examples: tuple[ParserExample, ...]
    sample_descriptions: dict[tuple[str, str], str]  # (example scene, description type) -> text, stripped
    null_plan_text: str = NULL_PLAN_GUIDELINE
    null_plan_source: str = "edsb"  # `reference` when read from the pinned runner file
    # Few-shot turns built from this pack, by whoever builds them (a pure function of the pack): every run of a
    # case sends the same examples, so they are rendered once.
    rendered: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def null_plan_guideline(self, planning_mode: PlanningMode) -> str:
        return null_plan_guideline(planning_mode, self.null_plan_text)

    def system_message(self, stem: str, extra_guidelines: str = "") -> str:
        """A system prompt: the file text, then the extra guideline lines (if any) after one newline."""
        text = self.system_texts[stem]
        extra = extra_guidelines.strip()
        return f"{text}\n{extra}" if extra else text

    @overload
    def examples(self, module: Literal["narrator"], tags: Iterable[str]) -> list[NarratorExample]: ...
    @overload
    def examples(self, module: Literal["event_parser"], tags: Iterable[str]) -> list[ParserExample]: ...
    def examples(self, module: Module, tags: Iterable[str]) -> list[NarratorExample] | list[ParserExample]:
        """The examples whose file stem is one of the case's tags, in file-name order."""
        wanted = set(tags)
        if module == "narrator":
            return [example for example in self.narrator_examples if example.stem in wanted]
        return [example for example in self.parser_examples if example.stem in wanted]

    def sample_description(self, scene_name: str, description_type: DescriptionType) -> str:
        """The description an example's query shows (stripped, as the reference does for examples)."""
        try:
            return self.sample_descriptions[scene_name, description_type]
        except KeyError:
            raise DataError(f"no sample {description_type} description for example scene {scene_name}") from None


# libyaml's safe loader when PyYAML was built with it (ten times faster), else the pure-Python one.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_examples(benchmark: Benchmark, module: Module, model: type[E]) -> tuple[E, ...]:
    folder = benchmark.root / PROMPTS_DIR / module / "examples"
    paths = sorted(folder.glob("*.yaml"), key=lambda p: p.name)
    if not paths:
        raise DataError(f"{folder}: no example files found")
    loaded: list[E] = []
    for path in paths:
        try:
            raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
        except yaml.YAMLError as exc:
            raise DataError(f"{path}: invalid YAML ({exc})") from None
        if not isinstance(raw, dict):
            raise DataError(f"{path}: expected a mapping at the top level")
        try:
            loaded.append(model.model_validate({**raw, "stem": path.stem}))
        except ValidationError as exc:
            raise DataError(f"{path}: {validation_message(exc)}") from None
    return tuple(loaded)


@cache
def _load(root: Path) -> PromptPack:
    benchmark = Benchmark(root)
    systems = {
        stem: benchmark.prompt_file(rel).read_text(encoding="utf-8").strip() for stem, rel in SYSTEM_FILES.items()
    }
    narrator_examples: tuple[NarratorExample, ...] = _load_examples(benchmark, "narrator", NarratorExample)
    parser_examples: tuple[ParserExample, ...] = _load_examples(benchmark, "event_parser", ParserExample)
    scenes = sorted({e.scene_name for e in narrator_examples} | {e.scene_name for e in parser_examples})
    samples = {
        (scene, kind): benchmark.prompt_file(f"{SAMPLE_DESCRIPTIONS_DIR}/{scene}_{kind}.txt")
        .read_text(encoding="utf-8")
        .strip()
        for scene in scenes
        for kind in get_args(DescriptionType)
    }
    guideline, source = _load_null_plan_guideline(root)
    return PromptPack(root, systems, narrator_examples, parser_examples, samples, guideline, source)


def load_prompt_pack(benchmark: Benchmark) -> PromptPack:
    """The prompt pack of a data directory, loaded once per directory."""
    return _load(benchmark.resolved_root)
