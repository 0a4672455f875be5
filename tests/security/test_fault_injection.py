"""Fault injection: a loopback model that fails at a given rate (latency, 5xx, 429 + Retry-After, resets, hangs,
truncated and non-JSON bodies, empty choices) under a real `edsb run`.

Whatever the faults, the harness must finish, record every planned run exactly once, score the runs whose model
answered, and record the others as `incomplete` with the transport kind of the fault. The books must balance: every
request the server saw is an attempt in some transcript, every injected fault a failed attempt. Fault draws come from
a seeded generator in arrival order, so the number of faults among the first requests is fixed.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.data import DATA, require_data
from tests.support.edsb_cli import Outcome, edsb_in_process
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.run_dir import read_results, transcript_records
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, program, run_args

RUNS = 12


class FaultyModel:
    """Serves the scripted model, except that each request fails with probability `rate` (seeded, arrival order).

    `fault` turns the answer the request would have had into the faulty one (a delay keeps it, the others drop it).
    """

    def __init__(self, fault: Callable[[Reply], Reply], rate: float, seed: int = 7) -> None:
        self.inner = ProgramScript([program("benign", BENIGN_BODY)] * (8 * RUNS))
        self.fault = fault
        self.rate = rate
        self.faults = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            failing = self._random.random() < self.rate
            self.faults += failing
        answer = self.inner(request)
        return self.fault(answer) if failing else answer


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: Callable[[Reply], Reply]
    rate: float
    kind: str | None  # transport kind of a run that gives up; None: the fault is harmless
    options: tuple[str, ...] = ()


SCENARIOS = [
    Scenario("latency", lambda ok: dataclasses.replace(ok, delay_s=0.2), 1.0, None, ("--max-retries", "0")),
    Scenario(
        "server_error", lambda _: Reply.error(503, headers={"Retry-After": "0"}), 0.5, "http", ("--max-retries", "1")
    ),
    Scenario("rate_limited", lambda _: Reply.rate_limited(retry_after="0"), 0.5, "http", ("--max-retries", "2")),
    Scenario(
        "gateway_html",
        lambda _: Reply.text("<html>502 Bad Gateway</html>", status=502),
        0.4,
        "http",
        ("--max-retries", "0"),
    ),
    Scenario("connection_reset", lambda _: Reply.reset(), 0.4, "connection", ("--max-retries", "0")),
    Scenario("hang", lambda _: Reply.hang(), 0.3, "timeout", ("--max-retries", "0", "--timeout", "1")),
    Scenario("truncated_body", lambda _: Reply.truncated("cut"), 0.4, "connection", ("--max-retries", "0")),
    Scenario(
        "non_json_body",
        lambda _: Reply.text("<html>oops</html>", status=200),
        0.4,
        "invalid_response",
        ("--max-retries", "0"),
    ),
    Scenario("empty_choices", lambda _: Reply.empty_choices(), 0.3, "invalid_response", ("--max-retries", "1")),
]


@dataclass(frozen=True)
class Invocation:
    """One invocation: its process, what results.jsonl and the transcripts held right after it, requests served."""

    process: Outcome
    records: list[dict[str, Any]]
    transcripts: list[dict[str, Any]]
    model: FaultyModel
    requests: int


def run_with_faults(
    scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str], concurrency: int = 4, *, reruns: int = 0
) -> list[Invocation]:
    """The same `edsb run` command against the faulty server, then `reruns` more times against it once healed."""
    out = tmp_path / "run"
    model = FaultyModel(scenario.fault, scenario.rate)
    outcomes = []
    with OpenAIServer(model) as server:
        args = run_args(server.base_url, out, RUNS, "--concurrency", str(concurrency), *scenario.options)
        for attempt in range(1 + reruns):
            if attempt:
                model.rate = 0.0
            seen = len(server.chat_requests)
            process = edsb_in_process(args, capsys)
            served = len(server.chat_requests) - seen
            outcomes.append(Invocation(process, read_results(out), transcript_records(out), model, served))
    return outcomes


@pytest.fixture(autouse=True)
def data_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require_data()
    monkeypatch.setenv("EDSB_DATA", str(DATA))
    monkeypatch.setenv("EDSB_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_run_is_recorded_once_with_the_right_kind(
    scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [outcome] = run_with_faults(scenario, tmp_path, capsys)
    assert "Traceback" not in outcome.process.stderr
    records = outcome.records
    incomplete = sum(r["status"] == "incomplete" for r in records)
    assert outcome.process.returncode == (1 if incomplete else 0), outcome.process.stderr  # holes exit non-zero
    assert sorted(r["repeat"] for r in records) == list(range(RUNS))  # each planned run once

    transcripts = outcome.transcripts
    gave_up = {t["run"].replace("__", "/") for t in transcripts if t["error"] is not None}
    for record in records:
        if record["key"] in gave_up:
            assert record["status"] == "incomplete"
            assert record["error_kind"] == f"transport_{scenario.kind}", record["error"]
            assert record["plan"] is None
        else:
            assert record["status"] == "passed", record["error"]

    # The books balance: server requests = attempts in transcripts; injected faults = failed attempts.
    attempts = [(t["response"] or t["error"])["attempts"] for t in transcripts]
    failed = sum(a - 1 if t["response"] else a for t, a in zip(transcripts, attempts, strict=True))
    assert sum(attempts) == outcome.requests
    if scenario.kind is None:
        assert failed == 0 and gave_up == set() and outcome.model.faults == outcome.requests
        assert all(r["latency_s"] >= 0.4 for r in records)  # two delayed answers per run
    else:
        assert failed == outcome.model.faults >= 1
        retries = int(scenario.options[scenario.options.index("--max-retries") + 1])
        if retries == 0:
            assert len(gave_up) >= 1


def test_retries_recover_and_a_rerun_completes_the_incomplete_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sequential runs make the draws deterministic: some requests recover on retry, some runs give up; the same
    command against a healthy server then runs exactly the incomplete ones, and nothing recorded is lost."""
    scenario = Scenario(
        "mixed", lambda _: Reply.error(500, headers={"Retry-After": "0"}), 0.6, "http", ("--max-retries", "1")
    )
    first, second = run_with_faults(scenario, tmp_path, capsys, concurrency=1, reruns=1)
    incomplete = {r["key"] for r in first.records if r["status"] == "incomplete"}
    passed = {r["key"]: r for r in first.records if r["status"] == "passed"}
    recovered = [t for t in first.transcripts if t["response"] and t["response"]["attempts"] > 1]
    assert incomplete and passed and recovered

    assert second.process.returncode == 0, second.process.stderr
    assert second.requests == 2 * len(incomplete)  # only the incomplete runs were run again
    final = second.records
    assert len(final) == len({r["key"] for r in final}) == RUNS
    assert all(r["status"] == "passed" for r in final)
    assert {r["key"]: r for r in final if r["key"] in passed} == passed  # earlier records kept as they were
