"""`--model oracle` proves the harness: through the real CLI, prompts, Narrator parsing, sandbox, sampler and judge,
the hand-written reference answers score 1.0 (1.0) in every cell of both paper presets, on all 40 cases at every
level they have, with `--sampler optimal`; with the reference's annealer (the default) every PI failure is a
sampler miss, the annealer's and not the answer's. `--model oracle-wrong` (the same answers with a wrong anchor, or
acting when the story says wait) fails every run, so the 1.0 is earned. One repeat here (five for the annealer);
`benchmarks/bench_oracle.py` runs the presets' five.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.selection import select_cases
from edsb.llm import ChatRequest, build_model, check_model, parse_model_spec
from edsb.llm.errors import ModelSpecError
from edsb.llm.oracle import OracleChatModel, OracleError
from edsb.planning.variants import PRESETS
from edsb.runner.keys import expand_keys
from tests.support.data import DATA
from tests.support.edsb_cli import run_edsb
from tests.support.network import block_network
from tests.support.run_dir import read_results, read_summary


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, preset: str, *options: str
) -> tuple[Path, list[dict]]:
    block_network(monkeypatch, allow_loopback=False)  # the oracle is built in: nothing may leave the machine
    out = tmp_path / f"{model}-{preset}"
    if "--repeats" not in options:
        options = (*options, "--repeats", "1")
    code = run_edsb("run", "--model", model, "--preset", preset, *options, "--out", str(out), "--quiet")
    assert code == 0
    return out, read_results(out)


def _expected_keys(benchmark: Benchmark, preset: str) -> set[str]:
    p = PRESETS[preset]
    cases = select_cases(p.cases, benchmark.cases)
    return {key.id for key in expand_keys(p.variants, cases, p.levels, 1, benchmark.cases)}


def _cells(summary: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    return [
        (variant, tag, level, cell)
        for variant, entry in summary["variants"].items()
        for tag, by_level in entry["cells"].items()
        for level, cell in by_level.items()
    ]


@pytest.mark.parametrize("preset", ["table1", "table2"])
def test_the_oracle_scores_one_in_every_cell(
    preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, benchmark: Benchmark
) -> None:
    out, records = _run(tmp_path, monkeypatch, "oracle", preset, "--sampler", "optimal")
    assert {r["key"] for r in records} == _expected_keys(benchmark, preset)
    failures = [(r["key"], r["status"], r["error"]) for r in records if not r["passed"]]
    assert failures == []
    cells = _cells(read_summary(out))
    assert cells and all(cell["success_rate"] == 1.0 and cell["execution_rate"] == 1.0 for *_, cell in cells)
    # The answers went through the real modules: code was executed into plans, PI plans carry sampled or written
    # points, and the null-plan case really planned nobody.
    for record in records:
        if record["case"] == 21:
            assert record["plan"] == {}
        else:
            assert record["plan"]
            assert all(entry["relationships"] or "sampled_position" in entry for entry in record["plan"].values())


def test_under_the_reference_annealer_every_pi_failure_of_the_oracle_is_a_sampler_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # seed 3, five repeats: the annealer stops outside the area in two of the 50 runs (cases 66 and 67). An empty
    # sampler secret draws from the seed alone, as before the secret existed, so these draws are the same in every
    # fresh directory.
    out, records = _run(
        tmp_path,
        monkeypatch,
        "oracle",
        "table2",
        *("--variant", "scene-graph", "--seed", "3", "--repeats", "5", "--sampler-secret", ""),
    )
    assert len(records) == 50 and all(r["sampler"] == {"collision": "bbox", "method": "reference"} for r in records)
    failed = [r for r in records if r["status"] == "failed"]
    assert failed and all(r["sampler_miss"] is True for r in failed)
    assert all(r["sampler_miss"] is False for r in records if r["status"] == "passed")
    assert {r["status"] for r in records} <= {"passed", "failed"}
    summary = read_summary(out)["variants"]["scene-graph"]
    cell = summary["cells"]["PI"]["0"]
    assert cell["passes"] == 50 - len(failed)
    assert cell["success_rate"] == round((50 - len(failed)) / 50, 2)  # the rate stays the annealer's
    assert summary["pi_sampler"]["0"] == {
        "sampler": "reference", "runs": 50, "failures": len(failed), "errors": 0, "sampler_misses": len(failed)
    }  # fmt: skip


def test_both_presets_together_cover_all_forty_cases(benchmark: Benchmark) -> None:
    cases = {case for p in PRESETS.values() for case in select_cases(p.cases, benchmark.cases)}
    assert cases == set(benchmark.cases) and len(cases) == 40


@pytest.mark.parametrize("preset", ["table1", "table2"])
def test_the_negative_control_fails_in_every_cell(
    preset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, benchmark: Benchmark
) -> None:
    out, records = _run(tmp_path, monkeypatch, "oracle-wrong", preset)
    assert {r["key"] for r in records} == _expected_keys(benchmark, preset)
    # Judged and rejected, not crashed: the wrong answers are well-formed plans that put someone in the wrong place.
    assert {r["status"] for r in records} == {"failed"}
    # and not the annealer's fault: the optimiser fails them too (Direct Inference samples nothing)
    assert all(r["sampler_miss"] is (False if r["sampler"] else None) for r in records)
    cells = _cells(read_summary(out))
    assert cells and all(cell["success_rate"] == 0.0 and cell["execution_rate"] == 1.0 for *_, cell in cells)


def test_model_specs_and_check_model() -> None:
    assert str(parse_model_spec("oracle")) == "oracle"
    assert str(parse_model_spec("oracle-wrong")) == "oracle-wrong"
    with pytest.raises(ModelSpecError, match="unknown model spec"):
        parse_model_spec("oracle:gpt-4o")
    result = check_model("oracle")
    assert result["ok"] is True and result["model"] == "oracle"
    model = build_model("oracle", data=DATA)  # never behind the response cache: answers are instant and exact
    assert isinstance(model, OracleChatModel) and model.identity == "oracle"


def test_the_oracle_refuses_requests_that_are_not_benchmark_prompts() -> None:
    model = OracleChatModel(DATA)
    request = ChatRequest(messages=[{"role": "user", "content": "What is 2 + 2?"}], temperature=0.1)
    with pytest.raises(OracleError, match="benchmark prompts only"):
        asyncio.run(model.complete(request))
    story = ChatRequest(
        messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "[User Instruction]\nSing."}],
        temperature=0.1,
        json_mode=True,
    )
    with pytest.raises(OracleError, match="no story the oracle knows"):
        asyncio.run(model.complete(story))
