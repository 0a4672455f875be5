"""Concurrency changes how fast a selection runs, never what it produces; CPU-bound steps leave the event loop free."""

from __future__ import annotations

from pathlib import Path

from edsb.data.benchmark import Benchmark
from edsb.runner.config import RunConfig
from edsb.runner.keys import expand_keys
from edsb.runner.run import run_benchmark
from tests.support.edsb_cli import scripted_config
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import content, raw_lines, records_by_key
from tests.support.scripted_planner import ScriptedPlanner

DELAY_S = 0.04


def _config(server: OpenAIServer, **overrides: object) -> RunConfig:
    return scripted_config(server.base_url, **{"cases": [0, 2, 13, 14, 60, 61], "repeats": 2, **overrides})


def test_concurrency_1_and_8_give_the_same_results(benchmark: Benchmark, tmp_path: Path) -> None:
    outcomes = {}
    overlap = {}
    for concurrency in (1, 8):
        with OpenAIServer(ScriptedPlanner(benchmark, delay_s=DELAY_S)) as server:
            config = _config(server, concurrency=concurrency)
            run_benchmark(config, tmp_path / f"c{concurrency}", quiet=True)
            overlap[concurrency] = server.max_in_flight
        outcomes[concurrency] = records_by_key(tmp_path / f"c{concurrency}")

    expected = {key.id for key in expand_keys(["ours"], config.cases, [0, 1, 2], 2, benchmark.cases)}
    assert set(outcomes[1]) == set(outcomes[8]) == expected
    for key in sorted(expected):
        assert content(outcomes[1][key]) == content(outcomes[8][key]), key
    statuses = {record["status"] for record in outcomes[1].values()}
    assert {"passed", "failed", "error"} <= statuses  # the comparison covers every kind of outcome
    assert any(record["plan"] and record["sampler"] for record in outcomes[1].values())  # PI runs were sampled
    # Model-caused errors keep the tokens of every call that was answered.
    errors = [record for record in outcomes[8].values() if record["status"] == "error"]
    assert {"narrator_format", "code_runtime"} <= {record["error_kind"] for record in errors}
    for record in errors:
        modules = {"narrator"} if record["error_kind"] == "narrator_format" else {"narrator", "event_parser"}
        assert set(record["tokens"]) == modules and record["prompt_tokens"] > 0, record["key"]
    # One run in flight: each request waits for the previous answer. Eight: requests overlap.
    assert overlap[1] == 1
    assert 1 < overlap[8] <= 8


def test_sandbox_work_runs_off_the_event_loop(benchmark: Benchmark, tmp_path: Path) -> None:
    """A run whose code spins until the sandbox's timeout must not hold up the runs next to it."""
    planner = ScriptedPlanner(benchmark, flaws=False, spin_cases=frozenset({13}))
    with OpenAIServer(planner) as server:
        config = _config(
            server, cases=[0, 1, 2, 3, 4, 10, 11, 13], distraction=[0], repeats=1, concurrency=4, code_timeout=2.0
        )
        run_benchmark(config, tmp_path, quiet=True)
    records = records_by_key(tmp_path)
    spinning = records.pop("ours/tc13-d0-r0")
    assert (spinning["status"], spinning["error_kind"]) == ("error", "code_timeout")
    assert spinning["error"].endswith("TimeoutError: the code ran longer than 2 s")  # the spin ran until its limit
    assert len(records) == 7 and all(record["status"] == "passed" for record in records.values())
    # Runs that started after the spinning one (it is fourth in the reference's order) still finished before it.
    assert raw_lines(tmp_path)[-1].startswith(b'{"format":2,"key":"ours/tc13-d0-r0"')
