"""A scripted "model" for the loopback server: it reads each chat request the way an LLM would (which module is
asking, which story it is about) and answers with hand-written Narrator JSON or plan code.

The handler sees only the HTTP request: the module comes from JSON mode, the system prompt and the query's
sections; the case from the `[User Instruction]` section (Narrator) or from the event it narrated earlier
(`[Event to Parse]`). The spatial part of each answer is derived from the case's `expected_plans` (read from the
data files at test time), so the answers are correct by construction, but they are written as code a model would
write: comments, a character handle, area functions, `set_target_action`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from edsb.data.models import TestCase
from edsb.llm.oracle.model import query_sections
from tests.support.openai_server import RecordedRequest, Reply

Module = Literal["narrator", "wo_event", "event_parser", "direct_parser"]

# The event each scripted case narrates, as a model would phrase it (no positions, as the Narrator prompt asks).
ACTIVITIES: dict[int, str] = {
    0: "send a text message on his phone right beside the small table between the armchairs",
    13: "eat a sandwich sitting at the kitchen table",
    21: "",  # the coffee maker is busy: no event yet
    44: "join their friend Scott at his table and share a meal",
    60: "stand in front of the refrigerator",
    63: "stand in the open space in front of the couches",
}
REASONS: dict[int, str] = {
    0: "The instruction asks Ryan to text someone next to the table between the armchairs.",
    13: "David should eat his sandwich seated in the kitchen, which moves the story forward.",
    21: "Melissa is still making coffee with the only coffee maker, so Christopher has to wait before he can start.",
    44: "Jason and Kimberly arrive to eat with Scott; both of them sit at his table.",
    60: "Theodore's only task is to stand at the fridge.",
    63: "Douglas stands where the couches face each other.",
}
# Direct Inference answers: world coordinates chosen inside the expected area and off every floor object
# (checked once with edsb.scoring.judge.Judge on the real scenes: House fridge_1, Office couch_1 / couch_3).
DIRECT_POSITIONS: dict[int, tuple[float, float]] = {60: (4.4, 1.5), 63: (3.3, 3.0)}

# Area function a model would call for each predicate of an expected condition atom.
_AREA_FUNCTIONS = {
    "sit on": "get_area_to_sit_on",
    "adjacent to": "get_area_adjacent_to",
    "close to": "get_area_adjacent_to",  # within reach is also close (the evaluator accepts it)
    "in front of": "get_area_in_front_of",
    "behind": "get_area_behind",
    "to the left of": "get_area_left_of",
    "to the right of": "get_area_right_of",
}


def module_of(body: Mapping[str, Any]) -> Module:
    """Which module is asking, from what the request itself says."""
    messages = body["messages"]
    system = messages[0]["content"]
    query = query_sections(messages[-1]["content"])
    if (body.get("response_format") or {}).get("type") == "json_object":
        return "narrator"
    if "generate_next_plan" in system or "Planning History" in query:
        return "wo_event"
    if "Event History" in query:  # the Narrator asked without JSON mode (`--no-json-mode`)
        return "narrator"
    if "Event to Parse" in query:
        return "direct_parser" if "2D coordinates" in system else "event_parser"
    if "User Instruction" in query:  # the Narrator, sent without JSON mode
        return "narrator"
    raise ValueError("cannot tell which module sent this request")


def chosen_atoms(condition: str) -> list[str]:
    """One way to satisfy a condition: the first alternative of each `&&` part (enough for the scripted cases)."""
    parts = [part.strip().strip("()") for part in condition.split("&&")]
    return [part.split("||")[0].strip() for part in parts]


def area_call(atom: str) -> str:
    for predicate, function in _AREA_FUNCTIONS.items():
        if atom.startswith(predicate + " "):
            return f'{function}("{atom.removeprefix(predicate + " ")}")'
    raise ValueError(f"no scripted area function for {atom!r}")


def position_call(atoms: Sequence[str]) -> str:
    calls = [area_call(atom) for atom in atoms]
    expression = calls[0]
    for call in calls[1:]:
        expression = f"get_intersected_area({expression}, {call})"
    return expression


def handle_name(character: str) -> str:
    return character.lower()


@dataclass(frozen=True)
class Intent:
    """What one character should do: an action label and the conditions its position must meet."""

    character: str
    action: str
    atoms: tuple[str, ...]


def intents_of(case: TestCase) -> list[Intent]:
    """The correct intent per expected character, from the case file."""
    intents = []
    for plan in case.expected_plans:
        condition = plan.sampled_position if case.is_position_case else plan.relationships
        assert isinstance(condition, str), f"case {case.id}: scripted answers need a condition string"
        action = plan.target_action.split("||")[0].strip() if plan.target_action else "idle"
        intents.append(Intent(plan.character, action, tuple(chosen_atoms(condition))))
    return intents


def lcps_body(intents: Sequence[Intent], reason: str) -> list[str]:
    lines = [f"    # {reason}"]
    for intent in intents:
        var = handle_name(intent.character)
        lines += [
            f'    {var} = get_character("{intent.character}")',
            f"    {var}.set_position({position_call(intent.atoms)})",
            f'    {var}.set_target_action("{intent.action}")',
        ]
    lines.append(f"    return [{', '.join(handle_name(i.character) for i in intents)}]")
    return lines


def fenced(header: str, body: Sequence[str]) -> str:
    return "Here is the plan.\n\n```python\n" + "\n".join([header, *body]) + "\n```\n"


def narration(case: TestCase) -> str:
    activity = ACTIVITIES[case.id]
    characters = [plan.character for plan in case.expected_plans] if activity else []
    answer = {"reasoning": REASONS[case.id], "event": {"characters": characters, "activity": activity}}
    return json.dumps(answer, indent=4)


def parser_code(case: TestCase) -> str:
    return fenced("def parse_event():", lcps_body(intents_of(case), REASONS[case.id]))


def direct_code(case: TestCase) -> str:
    (intent,) = intents_of(case)
    x, y = DIRECT_POSITIONS[case.id]
    var = handle_name(intent.character)
    body = [
        f"    # {REASONS[case.id]} A free spot inside that area, clear of the furniture:",
        f'    {var} = get_character("{intent.character}")',
        f"    {var}.set_position([{x}, {y}])",
        f'    {var}.set_target_action("{intent.action}")',
        f"    return [{var}]",
    ]
    return fenced("def parse_event():", body)


def wo_event_code(case: TestCase) -> str:
    if not ACTIVITIES[case.id]:  # nothing to do yet: a plan that sets nobody is a skip
        return fenced("def generate_next_plan():", [f"    # {REASONS[case.id]}", "    return []"])
    return fenced("def generate_next_plan():", lcps_body(intents_of(case), REASONS[case.id]))


Answer = Callable[[TestCase], str]


@dataclass
class StoryModel:
    """The request handler. `answers` may replace the answer of a module for chosen cases (mistakes on purpose)."""

    cases: Mapping[int, TestCase]
    answers: dict[tuple[Module, int], Answer] = field(default_factory=dict)
    usage: list[tuple[Module, int, int, int]] = field(default_factory=list)  # module, case, prompt, completion
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def case_for(self, module: Module, query: Mapping[str, str]) -> TestCase:
        scripted = [case for case in self.cases.values() if case.id in ACTIVITIES]
        if module in ("narrator", "wo_event"):
            instruction = query["User Instruction"]
            matches = [case for case in scripted if case.user_instruction.strip() == instruction]
        else:
            event = query["Event to Parse"]
            matches = [case for case in scripted if ACTIVITIES[case.id] and event.endswith("] " + ACTIVITIES[case.id])]
        if len(matches) != 1:
            raise ValueError(f"{module}: cannot tell which story this request is about")
        return matches[0]

    def answer(self, module: Module, case: TestCase) -> str:
        custom = self.answers.get((module, case.id))
        if custom is not None:
            return custom(case)
        default: dict[Module, Answer] = {
            "narrator": narration,
            "wo_event": wo_event_code,
            "event_parser": parser_code,
            "direct_parser": direct_code,
        }
        return default[module](case)

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        module = module_of(body)
        case = self.case_for(module, query_sections(body["messages"][-1]["content"]))
        text = self.answer(module, case)
        # Usage as a server reports it: roughly four characters per token.
        prompt = sum(len(message["content"]) for message in body["messages"]) // 4
        completion = len(text) // 4 + 1
        with self._lock:
            self.usage.append((module, case.id, prompt, completion))
        return Reply.completion(text, prompt_tokens=prompt, completion_tokens=completion, model=body["model"])


# --- mistakes on purpose (`StoryModel.answers`) ----------------------------------------------------------------------


def seat_answer(seat: str, comment: str) -> Answer:
    def answer(case: TestCase) -> str:
        (expected,) = case.expected_plans
        var = handle_name(expected.character)
        action = expected.target_action or "idle"
        body = [
            f"    # {comment}",
            f'    {var} = get_character("{expected.character}")',
            f'    {var}.set_position(get_area_to_sit_on("{seat}"))',
            f'    {var}.set_target_action("{action}")',
            f"    return [{var}]",
        ]
        return fenced("def parse_event():", body)

    return answer


def closest_table_answer(case: TestCase) -> str:
    (expected,) = case.expected_plans
    body = [
        "    # The table between the armchairs; the closest table to it is where Ryan should stand.",
        '    table = get_closest_object("table_99", "table")',
        f'    ryan = get_character("{expected.character}")',
        "    ryan.set_position(get_area_adjacent_to(table))",
        '    ryan.set_target_action("use_smartphone")',
        "    return [ryan]",
    ]
    return fenced("def parse_event():", body)


def prose_narration(case: TestCase) -> str:
    return f"Sure! Next, {case.expected_plans[0].character} sits down in the kitchen to eat."
