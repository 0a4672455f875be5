"""What the `edsb run --batch` tests share: the selection, the scripted story, and reading a directory's verdicts.

Cases 13 and 21, one repeat, no distraction: a plan judged false (13) beside one that passes (21), so a verdict
copied from the wrong request shows.
"""

from __future__ import annotations

from pathlib import Path

from edsb.data.benchmark import Benchmark
from tests.support.edsb_cli import run_edsb, scripted_run_args
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.run_dir import read_results
from tests.support.scripted_stories import StoryModel, seat_answer

CASES = "13,21"
MISTAKES = {("event_parser", 13): seat_answer("chair_3", "chair_3 is a free chair.")}
SELECTION = ("--cases", CASES, "--distraction", "0", "--repeats", "1", "--quiet")
PROBE_OK = Reply.completion('{"ok": true}')
Verdicts = dict[str, tuple[str, str | None]]


def verdicts(out: Path) -> Verdicts:
    return {r["key"]: (r["status"], r["error_kind"]) for r in read_results(out)}


def batch_args(base_url: str, out: Path, *options: str) -> list[str]:
    """`edsb run --batch` of the selection as `openai:scripted` at `base_url`, polling every 10 ms."""
    return [*scripted_run_args(base_url, out, *SELECTION), "--batch", "--batch-poll", "0.01", *options]


def story_model(benchmark: Benchmark) -> StoryModel:
    return StoryModel(benchmark.cases, answers=dict(MISTAKES))


def synchronous_verdicts(story: StoryModel, out: Path) -> tuple[Verdicts, int]:
    """The verdicts of the selection run one request at a time, and how many requests that took."""
    with OpenAIServer(story) as server:
        assert run_edsb(*scripted_run_args(server.base_url, out, *SELECTION, "--no-cache")) == 0
        sent = len(server.chat_requests)
    found = verdicts(out)
    assert {status for status, _ in found.values()} == {"passed", "failed"}
    return found, sent
