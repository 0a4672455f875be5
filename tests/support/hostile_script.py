"""A scripted loopback model whose every run gets its own Narrator reply and Event Parser program, for attacks on
the harness itself (parsers, sizes, Unicode) delivered through `edsb run` on case 13 (see `scripted_programs`).

With `--concurrency 1` the runs of one invocation happen one after another: the k-th Narrator request gets run k's
reply, and the Event Parser request that follows it gets run k's program. Tests map runs back to their script entry
through the transcripts (`runs_by_name`), by the marker each Narrator reply carries, rather than trusting the order.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.openai_server import RecordedRequest, Reply
from tests.support.run_dir import transcript_records
from tests.support.scripted_programs import BENIGN_BODY, is_narrator_request, program

BENIGN_PROGRAM = program("benign", BENIGN_BODY)
BENIGN_PLAN = {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_2"]}}


def narrator_json(marker: str, activity: str = "eat a sandwich sitting in the kitchen", **extra: Any) -> str:
    """A valid Narrator reply for case 13 carrying `marker` (its `reasoning`), with `extra` top-level fields."""
    event = {"characters": ["David"], "activity": activity}
    return json.dumps({"reasoning": marker, "event": event, **extra})


@dataclass(frozen=True)
class ScriptedRun:
    name: str  # must appear in the Narrator reply as the transcript shows it
    narrator: str
    program: str = BENIGN_PROGRAM
    model: str = "test-model"  # the model name the server reports


class RunScript:
    """Answers run k's Narrator request with `runs[k].narrator` and its Event Parser request with `runs[k].program`."""

    def __init__(self, runs: Sequence[ScriptedRun]) -> None:
        self.runs = list(runs)
        self._current = -1
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if is_narrator_request(request):
                self._current += 1
            if not 0 <= self._current < len(self.runs):
                return Reply.error(500, "the script is exhausted")
            run = self.runs[self._current]
        text = run.narrator if is_narrator_request(request) else run.program
        return Reply.completion(text, model=run.model)


def runs_by_name(out: Path, names: Sequence[str]) -> dict[str, str]:
    """Script entry name → run key, found by the marker in each run's Narrator response (as the transcript holds it)."""
    found: dict[str, str] = {}
    for record in transcript_records(out):
        if record["module"] != "narrator" or record["response"] is None:
            continue
        text = record["response"]["text"]
        matches = [name for name in names if f'"{name}"' in text or text.startswith(name)]
        assert len(matches) == 1, (matches, text[:200])
        found[matches[0]] = record["run"].replace("__", "/")
    return found
