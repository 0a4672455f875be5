"""`edsb compare` on real runs: the oracle against its negative control on the Table 1 preset (every run flips, so
the paired difference is −1.0 in every variant and tag, with the smallest p-value 30 cases allow), and a run
against itself (exactly 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.edsb_cli import edsb_in_process, isolate_environment, run_edsb
from tests.support.network import block_network


@pytest.fixture(scope="module")
def oracle_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("oracle-compare")
    outs = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, root / "cache")
        block_network(monkeypatch, allow_loopback=False)  # the oracle is built in: nothing may leave the machine
        for model in ("oracle", "oracle-wrong"):
            out = root / model
            code = run_edsb("run", "--model", model, "--preset", "table1", "--repeats", "1", "--out", out, "--quiet")
            assert code == 0
            outs.append(out)
    return outs[0], outs[1]


def test_oracle_against_oracle_wrong_is_minus_one(oracle_runs: tuple[Path, Path], capsys) -> None:
    code, out, err = edsb_in_process(["compare", *map(str, oracle_runs), "--format", "json"], capsys)
    assert code == 0 and err == ""
    comparison = json.loads(out)["comparisons"][0]
    assert comparison["coverage"] == {
        "pairs": 360, "only_base": 0, "only_run": 0, "incomplete_base": 0, "incomplete_run": 0,
    }  # fmt: skip
    rows = {(r["variant"], r["tag"]): r for r in comparison["rows"]}
    assert {variant for variant, _ in rows} == {"ours", "wo-event", "object-list", "scene-graph"}
    for (variant, tag), row in rows.items():
        success = row["success"]
        assert success["difference"] == -1.0, (variant, tag)
        assert success["p_value"] < 0.001, (variant, tag)
        assert success["interval"] == [-1.0, -1.0]
        assert (success["base_only"], success["run_only"]) == (row["pairs"], 0)
        assert row["execution"]["difference"] == 0.0  # the wrong answers still execute
    cases = {(d["variant"], d["case"]) for d in comparison["discordant_cases"]}
    assert len(cases) == 4 * 30
    _, markdown, _ = edsb_in_process(["compare", *map(str, oracle_runs), "--format", "markdown"], capsys)
    # Every pair differs by −1: the exact test over 30 cases leaves the point alone, and says why.
    assert "| ours | Total | success | 90 | 1.00 → 0.00 | -1.00 [-1.00, -1.00]* | <0.001 | 90 / 0 |" in markdown
    assert "| ours | Total | success | - | every pair differs by -1.00 |" in markdown


def test_a_real_run_against_itself_is_exactly_zero(oracle_runs: tuple[Path, Path], capsys) -> None:
    run = str(oracle_runs[1])
    code, out, _ = edsb_in_process(["compare", run, run, "--format", "json", "--by-level"], capsys)
    comparison = json.loads(out)["comparisons"][0]
    assert code == 0 and comparison["discordant_cases"] == []
    for row in comparison["rows"]:
        for metric in ("success", "execution"):
            assert row[metric]["difference"] == 0.0
            # The point where six cases or more agree on every pair; five or fewer cannot exclude anything.
            assert row[metric]["interval"] == ([0.0, 0.0] if row["cases"] >= 6 else [-1.0, 1.0])
            assert (row[metric]["base_only"], row[metric]["run_only"]) == (0, 0)
