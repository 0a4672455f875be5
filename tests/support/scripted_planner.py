"""A deterministic stand-in for an LLM behind the loopback OpenAI server: its answer is a function of the request
body alone, so two runs of the same selection get the same answers whatever the timing or concurrency.

It reads the case from the Narrator's query (the user instruction) and answers with the expected characters; the
Event Parser gets code that places them by the case's first expected alternative. A hash of the query picks a
flaw now and then, so a run directory holds passes, failures and model-caused errors of several kinds.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from tests.support.openai_server import RecordedRequest, Reply

_INSTRUCTION = re.compile(r"\[User Instruction\]\n(.*?)\n\n\[", re.DOTALL)
_EVENT = re.compile(r"\[Event to Parse\]\n.*scripted case (\d+)")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def first_alternative(condition: str | None) -> list[str]:
    """The atoms of one way to satisfy a condition: the first `||` branch, every `&&` part."""
    if not condition:
        return []
    depth, start, branches = 0, 0, []
    for i, ch in enumerate(condition):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and condition.startswith("||", i):
            branches.append(condition[start:i])
            start = i + 2
    branches.append(condition[start:])
    parts = branches[0].replace("(", "").replace(")", "").split("&&")
    return [part.split("||")[0].strip() for part in parts]


@dataclass
class ScriptedPlanner:
    """`OpenAIServer(handler=ScriptedPlanner(benchmark))`; `flaws=False` answers every run correctly, the Event
    Parser's code for `spin_cases` loops forever (the sandbox's timeout ends it)."""

    benchmark: Benchmark
    delay_s: float = 0.0
    flaws: bool = True
    spin_cases: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        self._by_instruction = {case.user_instruction.strip(): case for case in self.benchmark.cases.values()}

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json()["messages"]
        query = messages[-1]["content"]
        instruction = _INSTRUCTION.search(query)
        if instruction is not None:
            text = self._narration(self._by_instruction[instruction.group(1).strip()], _digest(query))
        else:
            event = _EVENT.search(query)
            if event is None:
                return Reply.error(400, "the scripted planner does not know this request")
            text = self._code(self.benchmark.case(int(event.group(1))), _digest(query))
        return Reply.completion(
            text, prompt_tokens=len(query) // 4, completion_tokens=len(text) // 4, delay_s=self.delay_s
        )

    def _narration(self, case: TestCase, digest: int) -> str:
        if self.flaws and digest % 7 == 0:
            return "I think David should eat now."  # not JSON: narrator_format
        names = [plan.character for plan in case.expected_plans]
        event = {"characters": names, "activity": f"scripted case {case.id}"}
        return json.dumps({"reasoning": "scripted", "event": event})

    def _code(self, case: TestCase, digest: int) -> str:
        flaw = digest % 5 if self.flaws else None
        lines = ["def parse_event():"]
        for i, plan in enumerate(case.expected_plans):
            position = first_alternative(plan.relationships or plan.sampled_position)
            action = (first_alternative(plan.target_action) or ["idle"])[0]
            if flaw == 1:
                action = "dance" if action != "dance" else "idle"  # a wrong action: the run fails
            lines += [
                f"    c{i} = get_character({plan.character!r})",
                f"    c{i}.set_position({position!r})",
                f"    c{i}.set_target_action({action!r})",
            ]
        if flaw == 0:
            lines.append('    get_closest_object("no_such_object_7")')  # KeyError: code_runtime
        if case.id in self.spin_cases:
            lines += ["    while True:", "        pass"]
        return "```python\n" + "\n".join(lines) + "\n```"
