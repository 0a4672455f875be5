"""Chat requests of the Narrator, w/o Event and the Event Parser (LCPS or Direct Inference), byte for byte
(docs/reference.md#chat-requests).

A request is the system prompt, one user/assistant pair per example kept for the case's tags, then the query. Example
queries go through the same query builders as live ones, with the example's own scene description, labels,
characters and history. The `[Feedback]` section always reads `None` (self-feedback is off in the benchmark).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from edsb.planning.narrator import NarratorEvent, make_event
from edsb.planning.prompt_pack import (
    NarratorExample,
    ParserExample,
    PromptPack,
)
from edsb.planning.scenario import (
    Character,
    HistoryEvent,
    Scenario,
    available_characters,
    cast_and_history,
    main_action,
)
from edsb.planning.variants import ModulePrompt, Variant
from edsb.results import ErrorKind, RunError

Message = dict[str, str]


class UnsupportedVariantError(RunError):
    """The prompt pack has no example answer for this variant and tag (w/o Event on PI, Direct Inference off PI)."""

    kind = ErrorKind.UNSUPPORTED_VARIANT


@dataclass(frozen=True)
class StagePrompt:
    """The messages one stage of the framework (Narrator or Event Parser) sends, before model settings apply."""

    module: str  # `narrator` or `event_parser`
    messages: list[Message]  # [{"role": ..., "content": ...}, ...]
    json_mode: bool  # ask for `response_format={"type": "json_object"}`

    @property
    def query(self) -> str:
        return self.messages[-1]["content"]


# --- query layouts ----------------------------------------------------------------------------------------------------
def _sections(*sections: str) -> str:
    return "\n\n".join(section.strip() for section in sections).strip()


def _header(title: str, body: str) -> str:
    return f"[{title}]\n{body}"


def _character_lines(characters: Sequence[Character], history: Sequence[HistoryEvent]) -> str:
    return "".join(f"- {c.name}\n" for c in available_characters(characters, history))


def _story_query(
    description: str,
    labels: Sequence[str],
    instruction: str | None,
    characters: Sequence[Character],
    history: Sequence[HistoryEvent],
    past: tuple[str, str],
) -> str:
    """The Narrator's query layout; `past` is the history section (title, text), which differs between variants."""
    title, text = past
    return _sections(
        _header("Scene Description", description),
        _header("Available Activities", repr(list(labels))),
        _header("User Instruction", instruction or "None"),
        _header("Available Characters", _character_lines(characters, history)),
        _header(title, text or "None"),
        _header("Feedback", "None"),
    )


def narrator_query(
    description: str,
    labels: Sequence[str],
    instruction: str | None,
    characters: Sequence[Character],
    history: Sequence[HistoryEvent],
) -> str:
    events = "".join(f"- Event {i}: {event.label} ({event.state})\n" for i, event in enumerate(history))
    return _story_query(description, labels, instruction, characters, history, ("Event History", events))


def planning_history_query(
    description: str,
    labels: Sequence[str],
    instruction: str | None,
    characters: Sequence[Character],
    history: Sequence[HistoryEvent],
) -> str:
    """The w/o Event Narrator's query: like the Narrator's, with each past event shown as parsed plans."""
    plans = ""
    for i, event in enumerate(history):
        plans += f"- Plan {i}:\n"
        for name, details in event.details.items():
            plans += (
                f"  - {name}:\n"
                f"    - target_action: '{main_action(details.target_action)}'\n"
                f"    - relationships: {list(details.relationships)!r}\n"
                f"    - state: '{event.state}'\n"
            )
    return _story_query(description, labels, instruction, characters, history, ("Planning History", plans))


def parser_query(description: str, labels: Sequence[str], characters: Sequence[Character], event_label: str) -> str:
    """The Event Parser's query; it shows every character's state but no history."""
    states = ""
    for c in characters:
        states += f"- {c.name}:\n  - state: '{c.state}'\n  - current_action: '{c.main_action}'\n"
        if c.state in ("idle", "interacting"):
            states += f"  - relationships: {list(c.relationships)!r}\n"
        else:  # a character on its way somewhere (never in the benchmark): no target is known before planning
            states += f"  - target_action: ''\n  - target_relationships: {list(c.relationships)!r}\n"
    return _sections(
        _header("Scene Description", description),
        _header("Available Action Labels", repr(list(labels))),
        _header("Current States of Characters", states),
        _header("Event to Parse", event_label),
        _header("Feedback", "None"),
    )


# --- few-shot examples ------------------------------------------------------------------------------------------------
def _example_cast(example: NarratorExample | ParserExample) -> tuple[tuple[Character, ...], tuple[HistoryEvent, ...]]:
    return cast_and_history(example.characters, example.previous_events, add_postures=False, names_from_cast=False)


def _narration_json(example: NarratorExample) -> str:
    """The example answer as the Narrator should write it: indented JSON with the character list on one line."""
    # One line of reasoning: paragraph breaks and line breaks both become single spaces.
    flattened = " ".join(example.response.reasoning.replace("\n\n", "\n").split("\n"))
    reasoning = flattened.replace("event/plan", "event").strip()
    placeholder = "@@edsb-characters@@"
    answer = {"reasoning": reasoning, "event": {"characters": placeholder, "activity": example.response.activity}}
    return json.dumps(answer, indent=4).replace(json.dumps(placeholder), json.dumps(example.response.characters))


def _answer(example: NarratorExample | ParserExample, prompt: ModulePrompt) -> str:
    if prompt.accepted_examples is not None and example.stem not in prompt.accepted_examples:
        raise UnsupportedVariantError(f"{prompt.system} accepts only {sorted(prompt.accepted_examples)} examples")
    if isinstance(example, NarratorExample) and prompt.answer_field == "response":
        return _narration_json(example)
    text = getattr(example, prompt.answer_field, None)
    if not isinstance(text, str):
        raise UnsupportedVariantError(f"{prompt.module}/examples/{example.stem}.yaml has no {prompt.answer_field}")
    return text.strip()


def _assemble(module: str, system: str, pairs: Sequence[tuple[str, str]], query: str, json_mode: bool) -> StagePrompt:
    turns = [("system", system)]
    for shot_query, shot_answer in pairs:
        turns.extend((("user", shot_query), ("assistant", shot_answer)))
    turns.append(("user", query))
    return StagePrompt(module, [{"role": role, "content": text} for role, text in turns], json_mode)


def _shots(pack: PromptPack, module: str, variant: Variant, tags: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The example (query, answer) turns of a stage for a case's tags, rendered once per pack."""
    key = ("shots", module, variant, tuple(tags))
    pairs = pack.rendered.get(key)
    if pairs is None:
        pairs = pack.rendered[key] = tuple(
            _narrator_shots(pack, variant, tags) if module == "narrator" else _parser_shots(pack, variant, tags)
        )
    return pairs


def _narrator_shots(pack: PromptPack, variant: Variant, tags: Sequence[str]) -> Iterator[tuple[str, str]]:
    build = planning_history_query if variant.planning_mode == "no_event" else narrator_query
    for example in pack.examples("narrator", tags):
        characters, history = _example_cast(example)
        description = pack.sample_description(example.scene_name, variant.description_type)
        user = build(description, example.action_labels, example.user_instruction, characters, history)
        yield user, _answer(example, variant.narrator)


def _parser_shots(pack: PromptPack, variant: Variant, tags: Sequence[str]) -> Iterator[tuple[str, str]]:
    assert variant.parser is not None
    for example in pack.examples("event_parser", tags):
        characters, _ = _example_cast(example)
        description = pack.sample_description(example.scene_name, variant.description_type)
        label = make_event(example.event.characters, example.event.activity).label
        user = parser_query(description, example.action_labels, characters, label)
        yield user, _answer(example, variant.parser)


def narrator_request(scenario: Scenario, pack: PromptPack) -> StagePrompt:
    """The Narrator call of a run (or the w/o Event call, which also answers with code)."""
    variant = scenario.variant
    prompt = variant.narrator
    build = planning_history_query if variant.planning_mode == "no_event" else narrator_query
    guideline = pack.null_plan_guideline(variant.planning_mode) if scenario.case.allow_null_plan else ""
    pairs = _shots(pack, "narrator", variant, scenario.case.tags)
    query = build(
        scenario.description,
        scenario.action_labels,
        scenario.case.user_instruction,
        scenario.characters,
        scenario.history,
    )
    return _assemble("narrator", pack.system_message(prompt.system, guideline), pairs, query, prompt.json_mode)


def parser_request(scenario: Scenario, pack: PromptPack, event: NarratorEvent) -> StagePrompt:
    """The Event Parser call for the Narrator's event (LCPS, or Direct Inference's raw-position variant)."""
    variant = scenario.variant
    prompt = variant.parser
    if prompt is None:
        raise ValueError(f"{variant.title} has no Event Parser")
    pairs = _shots(pack, "event_parser", variant, scenario.case.tags)
    query = parser_query(scenario.description, scenario.action_labels, scenario.characters, event.label)
    return _assemble("event_parser", pack.system_message(prompt.system), pairs, query, prompt.json_mode)
