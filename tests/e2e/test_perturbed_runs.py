"""The robustness suite end to end: `edsb run --perturb SEED` through the real CLI, prompts, sandbox, sampler and
judge. The oracle, told the mapping, still solves every case; the negative control still fails every case; and no
prompt sent to the model leaks an original name: every request's query, renamed back, is the original query (object
list and scene graph up to their shuffled order), while the system prompt and few-shot turns, which are about other
scenes, are the original ones byte for byte."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.models import SCENES
from edsb.data.perturb import case_character_names
from edsb.llm.oracle.model import query_sections
from tests.support.data import DATA, unordered
from tests.support.edsb_cli import SAMPLER_SECRET, edsb_in_process, isolate_environment, run_edsb
from tests.support.network import block_network
from tests.support.run_dir import read_results, transcript_records

SEEDS = (1, 2, 3)
PRESETS = ("table1", "table2")


@dataclass
class Runs:
    root: Path

    def out(self, model: str, preset: str, seed: int, again: bool = False) -> Path:
        return self.root / f"{model}-{preset}-{seed}{'-again' if again else ''}"


def _run(out: Path, model: str, preset: str, seed: int | None) -> None:
    # One sampler secret for every directory: their PI runs are compared draw for draw.
    args = ["run", "--model", model, "--preset", preset, "--repeats", "1", "--sampler-secret", SAMPLER_SECRET]
    args += [] if seed is None else ["--perturb", str(seed)]
    assert run_edsb(*args, "--out", str(out), "--quiet") == 0


@pytest.fixture(scope="module")
def perturbed_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    found = Runs(tmp_path_factory.mktemp("perturbed"))
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, found.root / "cache")
        block_network(monkeypatch, allow_loopback=False)
        for preset in PRESETS:
            for seed in (0, *SEEDS):
                _run(found.out("oracle", preset, seed), "oracle", preset, seed)
            for seed in SEEDS:
                _run(found.out("oracle-wrong", preset, seed), "oracle-wrong", preset, seed)
        _run(found.out("oracle", "table1", 1, again=True), "oracle", "table1", 1)
        _run(found.root / "default-table2", "oracle", "table2", None)
    yield found


def _statuses(out: Path) -> dict[str, tuple[str, str | None]]:
    return {r["key"]: (r["status"], r["reason"]) for r in read_results(out)}


@pytest.mark.parametrize("seed", SEEDS)
def test_the_oracle_solves_every_perturbed_case_and_the_control_none(perturbed_runs: Runs, seed: int) -> None:
    for preset in PRESETS:
        summary = json.loads((perturbed_runs.out("oracle", preset, seed) / "summary.json").read_text())
        assert summary["perturbation"] == f"perturbed (seed {seed})"
        original = _statuses(perturbed_runs.out("oracle", preset, 0))
        perturbed = _statuses(perturbed_runs.out("oracle", preset, seed))
        # Run for run, the perturbed verdict is the original one: same keys, same puzzle, same seeded sampler.
        assert perturbed == original and len(original) > 0
        wrong = read_results(perturbed_runs.out("oracle-wrong", preset, seed))
        assert sorted(r["key"] for r in wrong) == sorted(original)
        assert {r["status"] for r in wrong} == {"failed"}
    # Table 1 has no sampler in the loop: every run passes, every cell reads 1.0 (1.0).
    records = read_results(perturbed_runs.out("oracle", "table1", seed))
    assert {r["status"] for r in records} == {"passed"}
    cells = json.loads((perturbed_runs.out("oracle", "table1", seed) / "summary.json").read_text())["variants"]
    rates = [
        (c["success_rate"], c["execution_rate"])
        for v in cells.values()
        for t in v["cells"].values()
        for c in t.values()
    ]
    assert rates and set(rates) == {(1.0, 1.0)}


def _canonical(query: str) -> dict[str, Any]:
    """A query's sections, the scene description parsed when it is an object list or a scene graph (whose
    listing order and scene order the perturbation shuffles)."""
    sections: dict[str, Any] = dict(query_sections(query))
    description = sections.get("Scene Description", "")
    if description.startswith("["):
        sections["Scene Description"] = sorted(ast.literal_eval(description))
    elif description.startswith("{"):
        sections["Scene Description"] = unordered(json.loads(description))
    return sections


def _requests(out: Path) -> list[dict[str, Any]]:
    return transcript_records(out)


def _ids(text: str) -> list[str]:
    return re.findall(r"\b[a-z_]+_\d+\b", text)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("preset", PRESETS)
def test_no_prompt_leaks_an_original_name(perturbed_runs: Runs, benchmark: Benchmark, preset: str, seed: int) -> None:
    perturbed = Benchmark(DATA, seed)
    names = {name for case in benchmark.cases.values() for name in case_character_names(case)}
    any_name = re.compile(r"\b(?:" + "|".join(sorted(names, key=len, reverse=True)) + r")\b")
    inverse = {scene: perturbed.renaming(scene).inverse() for scene in SCENES}
    mappings = {scene: perturbed.object_mapping(scene) for scene in SCENES}
    original = _requests(perturbed_runs.out("oracle", preset, 0))
    renamed = _requests(perturbed_runs.out("oracle", preset, seed))
    assert [(r["run"], r["module"]) for r in renamed] == [(r["run"], r["module"]) for r in original]
    assert renamed
    for scene in SCENES:
        assert any(old != new for old, new in mappings[scene].items())
    for before, after in zip(original, renamed, strict=True):
        case = int(re.search(r"tc(\d+)-", after["run"]).group(1))  # type: ignore[union-attr]
        scene = benchmark.case(case).scene_name
        mapping = mappings[scene]
        old_messages, new_messages = before["request"]["messages"], after["request"]["messages"]
        # The prompt pack's system prompt and few-shot turns are about other scenes: left as they are.
        assert new_messages[:-1] == old_messages[:-1]
        query, old_query = new_messages[-1]["content"], old_messages[-1]["content"]
        assert query != old_query
        assert any_name.search(query) is None, any_name.search(query)
        # Renamed back, the query is the original one: every name was rewritten, whole words only, one to one.
        restored = inverse[scene].text(query)
        assert _canonical(restored) == _canonical(old_query)
        # So an original id stands where it did only where the mapping sends it to itself.
        for new_id, old_id in zip(_ids(query), _ids(restored), strict=True):
            assert new_id == mapping[old_id]
        assert any(new_id != old_id for new_id, old_id in zip(_ids(query), _ids(restored), strict=True))


def test_the_same_seed_sends_the_same_bytes_and_another_seed_other_bytes(perturbed_runs: Runs) -> None:
    def prompts(out: Path) -> list[tuple[str, str, list[dict[str, str]]]]:
        return [(r["run"], r["module"], r["request"]["messages"]) for r in _requests(out)]

    first, again = (
        prompts(perturbed_runs.out("oracle", "table1", 1)),
        prompts(perturbed_runs.out("oracle", "table1", 1, again=True)),
    )
    assert first == again
    other = prompts(perturbed_runs.out("oracle", "table1", 2))
    assert [key[:2] for key in other] == [key[:2] for key in first]
    assert all(a[2][-1] != b[2][-1] for a, b in zip(first, other, strict=True))


def test_seed_zero_sends_the_prompts_of_a_run_without_the_option(perturbed_runs: Runs) -> None:
    def sent(out: Path) -> list[tuple[str, str, dict[str, Any]]]:
        return [(r["run"], r["module"], r["request"]) for r in _requests(out)]

    default = sent(perturbed_runs.root / "default-table2")
    assert default and sent(perturbed_runs.out("oracle", "table2", 0)) == default
    assert json.loads((perturbed_runs.out("oracle", "table2", 0) / "config.json").read_text())["perturb"] == 0
    assert "perturbation" not in json.loads((perturbed_runs.root / "default-table2" / "summary.json").read_text())


def test_a_bad_seed_is_one_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for bad in ("-1", "two"):
        outcome = edsb_in_process(["run", "--model", "oracle", "--perturb", bad, "--out", tmp_path / "x"], capsys)
        outcome.assert_one_clear_error(2, contains="--perturb")
    assert not (tmp_path / "x").exists()


def test_the_report_says_perturbed_in_every_format(perturbed_runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    out = perturbed_runs.out("oracle", "table2", 3)
    label = "perturbed (seed 3)"
    as_json = edsb_in_process(["report", out, "--format", "json"], capsys)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["perturbation"] == label
    markdown = edsb_in_process(["report", out, "--format", "markdown"], capsys).stdout
    titles = [line for line in markdown.splitlines() if line.startswith("### ")]
    assert titles and all(title.endswith(f"— {label}") for title in titles)
    rows = edsb_in_process(["report", out, "--format", "csv"], capsys).stdout.splitlines()
    assert rows[0].endswith(",perturbation") and all(row.endswith(f",{label}") for row in rows[1:])
    table = edsb_in_process(["report", out], capsys).stdout
    assert f"all distraction levels — {label}" in table
    plain = edsb_in_process(
        ["report", perturbed_runs.out("oracle", "table2", 0), "--format", "markdown"], capsys
    ).stdout
    assert "perturbed" not in plain


def test_the_html_report_shows_a_perturbed_run_with_its_renamed_cases(
    perturbed_runs: Runs, benchmark: Benchmark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "report.html"
    assert (
        edsb_in_process(["report", perturbed_runs.out("oracle", "table2", 3), "--format", "html", "-o", page], capsys)[
            0
        ]
        == 0
    )
    html = page.read_text("utf-8")
    assert re.search(r"<title>[^<]*— perturbed \(seed 3\)</title>", html)
    perturbed = Benchmark(DATA, 3)
    for case in (60, 61):  # the drill-down quotes the renamed instruction, never the original one
        assert perturbed.case(case).user_instruction.strip() in html
        assert benchmark.case(case).user_instruction.strip() not in html


def test_compare_pairs_perturbed_and_original_runs_by_key(
    perturbed_runs: Runs, capsys: pytest.CaptureFixture[str]
) -> None:
    original, perturbed = perturbed_runs.out("oracle", "table1", 0), perturbed_runs.out("oracle-wrong", "table1", 2)
    assert sorted(_statuses(original)) == sorted(_statuses(perturbed))  # the run keys carry no name
    outcome = edsb_in_process(["compare", original, perturbed, "--format", "json"], capsys)
    assert outcome.returncode == 0 and "warning" not in outcome.stderr
    board = json.loads(outcome.stdout)
    assert [run["name"] for run in board["runs"]] == [original.name, f"{perturbed.name} (perturbed (seed 2))"]
    (comparison,) = board["comparisons"]
    assert comparison["coverage"]["only_base"] == comparison["coverage"]["only_run"] == 0  # every key paired
    gaps = {(row["variant"], row["tag"]): row["success"]["difference"] for row in comparison["rows"]}
    assert gaps[("ours", "Total")] == -1.0 and gaps[("scene-graph", "OA")] == -1.0


def test_a_directory_refuses_another_seed_and_reads_older_ones_as_seed_zero(
    perturbed_runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["run", "--model", "oracle", "--cases", "0", "--distraction", "0", "--quiet", "--out", out]
    assert edsb_in_process([*args, "--perturb", "1"], capsys).returncode == 0
    assert json.loads((out / "config.json").read_text())["perturb"] == 1
    refused = edsb_in_process([*args, "--perturb", "2"], capsys)
    refused.assert_one_clear_error(2, contains="perturb was 1, now 2")
    resumed = edsb_in_process([*args, "--perturb", "1"], capsys)
    assert resumed.returncode == 0 and "0 executed" in resumed.stderr
    # A directory written before the option existed has no field: it is the benchmark itself.
    old = tmp_path / "old"
    old_args = [*args[:-1], old]
    assert edsb_in_process(old_args, capsys).returncode == 0
    config = json.loads((old / "config.json").read_text())
    del config["perturb"]
    (old / "config.json").write_text(json.dumps(config))
    assert "0 executed" in edsb_in_process(old_args, capsys).stderr
    edsb_in_process([*old_args, "--perturb", "3"], capsys).assert_one_clear_error(2, contains="perturb was 0, now 3")


def test_score_and_cases_read_the_renamed_benchmark(
    perturbed_runs: Runs, benchmark: Benchmark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plans = tmp_path / "plans.jsonl"
    records = [r for r in read_results(perturbed_runs.out("oracle", "table1", 1)) if r["variant"] == "ours"]
    lines = [{"case": r["case"], "distraction": r["distraction"], "plan": r["plan"]} for r in records]
    plans.write_text("".join(json.dumps(line) + "\n" for line in lines))
    renamed = edsb_in_process(["score", plans, "--perturb", "1"], capsys)
    assert renamed.returncode == 0 and len(records) == 90  # 30 cases x 3 levels
    assert [json.loads(line)["passed"] for line in renamed.stdout.splitlines()] == [True] * len(records)
    # Against the benchmark as published, the renamed plans name characters no case has: only case 21's empty plan
    # (nobody acts yet) still passes.
    original = edsb_in_process(["score", plans], capsys)
    verdicts = [json.loads(line) for line in original.stdout.splitlines()]
    assert [v["passed"] for v in verdicts] == [v["case"] == 21 for v in verdicts]
    listed = edsb_in_process(["cases", "--perturb", "1", "--cases", "0", "--json"], capsys)
    (case,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert case["instruction"] == Benchmark(DATA, 1).case(0).user_instruction
    assert case["instruction"] != benchmark.case(0).user_instruction
