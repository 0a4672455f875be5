"""`inspect eval edsb/... --batch` (docs/inspect.md) against a loopback fake of OpenAI's Batch API: without JSON mode
the Inspect task gets the verdicts that `edsb run` gets from the same answers sent one by one; with it (the paper's
protocol) Inspect's batcher writes the SDK's `extra_body` into the batch file, which the API refuses, so the eval
fails and nothing is scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import BatchConfig

from edsb.data.benchmark import Benchmark
from edsb.inspect_tasks.tasks import edsb_table1
from tests.support.edsb_cli import SAMPLER_SECRET, isolate_environment, run_edsb
from tests.support.openai_batch import OpenAIBatchServer
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results
from tests.support.scripted_stories import StoryModel, seat_answer

CASES = "13,21"
# A plan judged false (13) beside one that passes (21), so a verdict copied from the wrong request shows.
MISTAKES = {("event_parser", 13): seat_answer("chair_3", "chair_3 is a free chair.")}


def batch_eval(server: OpenAIBatchServer, logs: Path, **task: Any) -> EvalLog:
    (log,) = inspect_eval(
        edsb_table1(cases=CASES, levels=0, epochs=1, sampler_secret=SAMPLER_SECRET, **task),
        model="openai/gpt-4o-2024-08-06",
        model_base_url=server.base_url,
        model_args={"responses_api": False},
        batch=BatchConfig(size=2, send_delay=0.5, tick=0.1),
        log_dir=str(logs),
        display="none",
        max_retries=0,
    )
    return log


def test_the_batch_route_without_json_mode_gets_edsb_runs_verdicts(
    benchmark: Benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_environment(monkeypatch, tmp_path / "cache")
    model = StoryModel(benchmark.cases, answers=dict(MISTAKES))
    # 1. edsb run, one request at a time.
    with OpenAIServer(model) as server:
        code = run_edsb(
            "run", "--model", "openai:scripted", "--base-url", server.base_url, "--cases", CASES,
            "--distraction", "0", "--repeats", "1", "--no-json-mode", "--quiet", "--out", str(tmp_path / "run"),
            "--sampler-secret", SAMPLER_SECRET,
        )  # fmt: skip
        sent_one_by_one = len(server.chat_requests)
    assert code == 0
    expected = {r["key"]: (r["status"], r["error_kind"]) for r in read_results(tmp_path / "run")}
    # 2. The Inspect task through the Batch API: every request goes in a batch (the chat endpoint answers 404).
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(model) as batch_server:
        log = batch_eval(batch_server, tmp_path / "logs", json_mode=False)
    assert log.status == "success", log.error
    assert batch_server.sync_requests == 0  # nothing went one by one
    assert sum(map(len, batch_server.batches.values())) == sent_one_by_one  # the same requests, by batch
    assert all(polls >= 2 for polls in batch_server.polls.values())  # each batch was polled until it completed
    got = {}
    for sample in read_eval_log(log.location).samples or []:
        assert sample.error is None, sample.error.message
        (score,) = sample.scores.values()
        got[score.metadata["key"]] = (score.metadata["status"], score.metadata["error_kind"])
    assert got == expected and {status for status, _ in got.values()} == {"passed", "failed"}


def test_the_batch_route_with_json_mode_fails_without_a_verdict(
    benchmark: Benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_environment(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(StoryModel(benchmark.cases)) as batch_server:
        log = batch_eval(batch_server, tmp_path / "logs")
    narrators = [line["body"] for lines in batch_server.batches.values() for line in lines]
    assert narrators and all(body["extra_body"] == {"response_format": {"type": "json_object"}} for body in narrators)
    assert log.status == "error"  # the eval stops: no run is scored as the model's failure
    samples = read_eval_log(log.location).samples or []
    assert all(sample.error is not None and not sample.scores for sample in samples)
