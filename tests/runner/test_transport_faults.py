"""A flaky server makes runs `incomplete`, never wrong: verdicts that were reached equal a healthy run's, transport
failures are kept apart from model errors, and the next pass over the same directory completes the rest."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from edsb.data.benchmark import Benchmark
from edsb.llm import RetryPolicy
from edsb.runner.config import RunConfig
from tests.support.edsb_cli import scripted_config
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.run_dir import content, records_by_key
from tests.support.scripted_planner import ScriptedPlanner
from tests.support.sweep import run_and_summarise

FAULTS = {
    "500": lambda: Reply.error(500, "scripted server error"),
    "429": lambda: Reply.rate_limited(retry_after="0.05"),
    "hang": Reply.hang,
    "garbage": lambda: Reply.text("<html>502 bad gateway</html>", status=200),
    "empty_choices": Reply.empty_choices,
    "truncated": Reply.truncated,
    "reset": Reply.reset,
}
RETRIES = 1  # every request of a doomed body fails 1 + RETRIES times


@dataclass
class FaultInjector:
    """Per module, every `doom_every`-th distinct request fails on every attempt; the one after it fails once and
    then succeeds. Fault kinds rotate, so each one occurs in both roles."""

    inner: ScriptedPlanner
    doom_every: dict[str, int] = field(default_factory=lambda: {"narrator": 3, "event_parser": 3})
    fates: dict[bytes, tuple[str, str | None]] = field(default_factory=dict)  # body -> (role, fault kind)
    attempts: Counter[bytes] = field(default_factory=Counter)
    _seen: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Reply:
        module = "narrator" if "[User Instruction]" in request.json()["messages"][-1]["content"] else "event_parser"
        with self._lock:
            if request.body not in self.fates:
                index = self._seen[module]
                self._seen[module] += 1
                role = ("doomed", "transient", "healthy")[min(index % self.doom_every[module], 2)]
                kinds = list(FAULTS)
                kind = kinds[(index // self.doom_every[module]) % len(kinds)] if role != "healthy" else None
                self.fates[request.body] = (role, kind)
            role, kind = self.fates[request.body]
            self.attempts[request.body] += 1
            attempt = self.attempts[request.body]
        if kind is not None and (role == "doomed" or attempt == 1):
            return FAULTS[kind]()
        return self.inner(request)


def _config(server: OpenAIServer) -> RunConfig:
    return scripted_config(
        server.base_url,
        cases=[0, 1, 2, 13, 14, 21, 60, 61],
        repeats=2,
        concurrency=8,
        timeout=2.0,  # generous: the server shares this process's GIL, and a slow answer must not look like a hang
    )


def test_transport_faults_make_runs_incomplete_and_a_rerun_completes_them(benchmark: Benchmark, tmp_path: Path) -> None:
    planner = ScriptedPlanner(benchmark)
    retry = RetryPolicy(max_retries=RETRIES, initial_delay_s=0.02, jitter=0.0)
    with OpenAIServer(planner) as healthy:
        run_and_summarise(_config(healthy), tmp_path / "healthy", quiet=True, retry=retry)
    reference = records_by_key(tmp_path / "healthy")

    injector = FaultInjector(planner)
    out = tmp_path / "flaky"
    with OpenAIServer(injector) as server:
        first = run_and_summarise(_config(server), out, quiet=True, retry=retry)
        records = records_by_key(out)

        assert sorted(records) == sorted(reference)  # every run key exactly once
        incomplete = {key: r for key, r in records.items() if r["status"] == "incomplete"}
        doomed = [body for body, (role, _) in injector.fates.items() if role == "doomed"]
        assert len(incomplete) == len(doomed) > 0
        assert all(injector.attempts[body] == 1 + RETRIES for body in doomed)
        for key, record in records.items():
            if record["status"] == "incomplete":
                assert record["error_kind"].startswith("transport_") and record["passed"] is False
                assert record["plan"] is None
            else:  # survived its faults through retries: exactly what a healthy server gives
                assert content(record) == content(reference[key]), key
        kinds = {record["error_kind"] for record in incomplete.values()}
        assert {"transport_http", "transport_timeout", "transport_invalid_response", "transport_connection"} <= kinds
        # The Narrator answered, then the Event Parser's request failed: the Narrator's tokens are kept.
        after_narration = [r for r in incomplete.values() if r["event"] is not None]
        assert after_narration and all(r["tokens"]["narrator"]["prompt"] > 0 for r in after_narration)
        assert all(r["prompt_tokens"] == 0 for r in incomplete.values() if r["event"] is None)

        summary = json.loads((out / "summary.json").read_text())["variants"]["ours"]
        assert summary["incomplete"] == len(incomplete) == first.stats.incomplete
        assert summary["runs"] == len(records) - len(incomplete)
        assert not any(kind.startswith("transport") for kind in summary["error_kinds"])
        model_errors = Counter(r["error_kind"] for r in records.values() if r["status"] == "error")
        assert sum(model_errors.values()) == first.stats.errors == sum(summary["error_kinds"].values())

        server.handler = planner  # the same server, healthy again
        second = run_and_summarise(_config(server), out, quiet=True, retry=retry)

    assert second.skipped == len(records) - len(incomplete)
    assert second.stats.done == len(incomplete) and second.stats.incomplete == 0
    final = records_by_key(out)
    assert sorted(final) == sorted(reference)
    for key, record in final.items():
        assert content(record) == content(reference[key]), key
    assert json.loads((out / "summary.json").read_text())["variants"]["ours"]["incomplete"] == 0
