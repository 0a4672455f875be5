"""`--model oracle`: a ChatModel that answers every benchmark request the way a careful human planner would.

It exists to prove the harness: if a perfect planner does not score 1.0 through the real pipeline (prompt
rendering, Narrator parsing, sandboxed plan code, position sampler, judge), a low score may be the harness's fault.
The oracle reads each request as a model would. The module asking comes from the request itself (JSON mode, the
system prompt, the query's sections); the story from the `[User Instruction]` section (Narrator, w/o Event), which
it looks up among the benchmark's cases, or from the event it narrated itself (`[Event to Parse]`). Its answers are
the hand-written ones in `edsb.llm.oracle.answers`: Narrator JSON, plan code on the spatial API that queries the scene
and its occupancy, and raw coordinates for Direct Inference. Nothing is read from the cases' expected plans.

On a perturbed benchmark (`perturb` > 0) the oracle is told the mapping: it recognises the renamed instructions and
events, and sends each answer through the renaming of its case's scene, so its code names the same objects and
characters under their new names. It is the test's planner, not a model; the pipeline it talks to is unchanged.

`oracle-wrong` is the negative control: the same answers with each character sent to a wrong anchor (or, in the
case that calls for waiting, acting at once), so a 1.0 from `oracle` is earned, not granted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from edsb.data.benchmark import Benchmark
from edsb.errors import EdsbError
from edsb.llm.oracle.answers import ANSWERS, Answer
from edsb.llm.protocol import ChatRequest, ChatResponse

Module = Literal["narrator", "wo_event", "event_parser", "direct_parser"]

_SECTION = re.compile(r"\[(?P<title>[^\]\n]+)\]\n(?P<body>.*?)(?=\n\n\[[^\]\n]+\]\n|\Z)", re.S)
_EVENT = re.compile(r"^\[(?P<names>[^\]]*)\] (?P<activity>.*)$", re.S)


class OracleError(EdsbError):
    """A request the oracle cannot place: not one of the benchmark's prompts, or a story it has no answer for."""


def query_sections(text: str) -> dict[str, str]:
    """`{title: body}` of a query made of `[Title]` sections separated by blank lines."""
    return {m.group("title"): m.group("body").strip() for m in _SECTION.finditer(text)}


def module_of(request: ChatRequest) -> Module:
    """Which module is asking, from what the request itself says."""
    system = request.messages[0].content
    query = query_sections(request.messages[-1].content)
    if request.json_mode:
        return "narrator"
    if "generate_next_plan" in system:
        return "wo_event"
    if "Event to Parse" in query:
        return "direct_parser" if "2D coordinates" in system else "event_parser"
    raise OracleError("the oracle answers benchmark prompts only: cannot tell which module sent this request")


def _fenced(header: str, body: str) -> str:
    return f"Here is the plan.\n\n```python\n{header}\n{body.rstrip()}\n```\n"


class OracleChatModel:
    """Answers from `edsb.llm.oracle.answers`; `wrong=True` gives the negative control. Never cached: it is instant."""

    def __init__(self, data: Path | str | None = None, *, wrong: bool = False, perturb: int = 0) -> None:
        benchmark = Benchmark.open(data, perturb=perturb)
        self.wrong = wrong
        self._by_instruction = {benchmark.case(i).user_instruction.strip(): i for i in benchmark.cases}
        missing = sorted(set(benchmark.cases) - set(ANSWERS))
        if missing:
            raise OracleError(f"the oracle has no answer for case(s) {', '.join(map(str, missing))}")
        # Each case's answers are rewritten as its scene's renaming says (the identity unperturbed).
        self._renaming = {case: benchmark.renaming(benchmark.case(case).scene_name) for case in benchmark.cases}
        pairs = [(case, answer) for case, answer in ANSWERS.items() if case in benchmark.cases]
        self._by_activity = {self._renaming[c].text(a.activity): c for c, a in pairs if a.activity}
        if wrong:
            self._by_activity |= {
                self._renaming[c].text(a.wrong.activity): c for c, a in pairs if a.wrong and a.wrong.activity
            }

    @property
    def identity(self) -> str:
        return "oracle-wrong" if self.wrong else "oracle"

    def __repr__(self) -> str:
        return f"OracleChatModel(wrong={self.wrong})"

    def case_of(self, module: Module, query: dict[str, str]) -> int:
        if module in ("narrator", "wo_event"):
            case = self._by_instruction.get(query.get("User Instruction", ""))
        else:
            match = _EVENT.match(query.get("Event to Parse", ""))
            case = self._by_activity.get(match.group("activity")) if match else None
        if case is None:
            raise OracleError(f"{module}: the request is about no story the oracle knows")
        return case

    def answer_for(self, case: int) -> Answer:
        answer = ANSWERS[case]
        return (answer.wrong or answer.misplaced()) if self.wrong else answer

    def reply(self, request: ChatRequest) -> str:
        """The text the oracle answers `request` with."""
        module = module_of(request)
        case = self.case_of(module, query_sections(request.messages[-1].content))
        answer = self.answer_for(case)
        if module == "narrator":
            event = {"characters": list(answer.characters), "activity": answer.activity}
            text = json.dumps({"reasoning": answer.reasoning, "event": event}, indent=4)
        elif module == "wo_event":
            text = _fenced("def generate_next_plan():", answer.code)
        elif module == "event_parser":
            text = _fenced("def parse_event():", answer.code)
        else:
            text = _fenced("def parse_event():", answer.direct_code())
        return self._renaming[case].text(text)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        text = self.reply(request)
        # Usage as a server would report it, roughly four characters per token, so reports have numbers to show.
        prompt = sum(len(message.content) for message in request.messages) // 4
        return ChatResponse(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=len(text) // 4 + 1,
            latency_s=0.0,
            model=self.identity,
            finish_reason="stop",
        )

    async def aclose(self) -> None:
        return None
