"""Runs whose plans keep the PI sampler as busy as the bounds allow never hold up the honest runs beside them.

The annealer once ran on the event loop's default executor, where aiohttp also resolves host names: a sweep at
concurrency 24 with 24 such plans against a server named `localhost` lost honest runs as `transport_timeout` while
the server answered at once. Here the same sweep runs in this process against a loopback server named `localhost`:
every honest run gets its verdict, the hostile ones theirs, and the only work handed to the loop's default executor is
the resolver's.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from edsb.planning import sampler_pool
from edsb.planning.sampler import MAX_SAMPLING_TERMS
from edsb.runner.run import run_benchmark
from tests.support.edsb_cli import scripted_config
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.scripted_programs import BENIGN_BODY, NARRATOR_REPLY, program

HOSTILE = 24
REPEATS = 26  # of each case: 26 runs of case 13 and 26 of case 60, 24 of which sample the worst plan
# The worst plan within the bound on cost terms: one character, 23 `close to` relationships that never converge.
WORST = [f"close to chair_{j % 6 + 1}" for j in range(MAX_SAMPLING_TERMS - 1)]
HOSTILE_BODY = (
    f"t = get_character('Theodore')\nt.set_position(Area({WORST!r}))\nt.set_target_action('idle')\nreturn [t]"
)
HONEST_PI_BODY = "t = get_character('Theodore')\nt.set_position(Area(['in front of fridge_1']))\nreturn [t]"
THEODORE_REPLY = json.dumps({"event": {"characters": ["Theodore"], "activity": "stand by the fridge"}})


class _Script:
    """Case 60's (Theodore's) Event Parser requests get the worst plan `HOSTILE` times, then an honest one; case 13's
    (David's) the benign program of the scripted runs."""

    def __init__(self) -> None:
        self.hostile_left = HOSTILE
        self._lock = threading.Lock()  # the server answers each connection on its own thread

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.body.decode()
        pi = "Theodore" in body
        if (request.json().get("response_format") or {}).get("type") == "json_object":
            return Reply.completion(THEODORE_REPLY if pi else NARRATOR_REPLY)
        if not pi:
            return Reply.completion(program("benign", BENIGN_BODY))
        with self._lock:
            hostile, self.hostile_left = self.hostile_left > 0, self.hostile_left - 1
        return Reply.completion(
            program("hostile" if hostile else "honest", HOSTILE_BODY if hostile else HONEST_PI_BODY)
        )


@pytest.fixture
def default_executor_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What any event loop hands its default executor, by name, from now on."""
    handed: list[str] = []
    original = asyncio.base_events.BaseEventLoop.run_in_executor

    def recording(self: asyncio.AbstractEventLoop, executor: Any, func: Any, *args: Any) -> Any:
        if executor is None:
            handed.append(repr(func))
        return original(self, executor, func, *args)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "run_in_executor", recording)
    return handed


def test_honest_runs_beside_the_worst_sampler_plans_all_get_their_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, default_executor_work: list[str]
) -> None:
    # 0.2 CPU seconds per plan instead of 2 keeps the test short; the worst plan needs several seconds either way.
    monkeypatch.setattr(sampler_pool, "MAX_SAMPLING_CPU_S", 0.2)
    with OpenAIServer(_Script()) as server:
        config = scripted_config(
            f"http://localhost:{server.port}/v1",
            variants=["scene-graph"],
            cases=[13, 60],
            distraction=[0],
            repeats=REPEATS,
            concurrency=24,
            timeout=30.0,
        )
        outcome = run_benchmark(config, tmp_path / "run", quiet=True)
    records = outcome.results
    assert len(records) == 2 * REPEATS
    incomplete = [(r.key, r.error) for r in records if r.status == "incomplete"]
    assert incomplete == []
    hostile = [r for r in records if r.case == 60 and r.error_kind == "code_output"]
    assert len(hostile) == HOSTILE and all("CPU seconds" in (r.error or "") for r in hostile)
    assert all(r.status in ("passed", "failed") for r in records if r not in hostile)
    assert sum(r.case == 13 and r.status == "passed" for r in records) == REPEATS
    # Names were resolved on the default executor, and nothing else ever waited there.
    assert default_executor_work and all("getaddrinfo" in work for work in default_executor_work)
