from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.planning.sampler import line_sampler, sample_position
from edsb.planning.sampler_rng import generator_for
from edsb.scoring.score_file import score_lines, summarize_scores
from tests.support.data import DATA
from tests.support.edsb_cli import edsb_in_process

RYAN_OK = {"Ryan": {"target_action": ["use_smartphone"], "relationships": ["adjacent to table_3"]}}
RYAN_WRONG = {"Ryan": {"target_action": ["use_smartphone"], "relationships": ["look at table_3"]}}
RYAN_TEXTING = {"Ryan": {"target_action": ["text"], "relationships": []}}


def line(**fields: object) -> str:
    return json.dumps(fields)


def test_one_output_per_line_in_order(benchmark: Benchmark) -> None:
    lines = [
        line(case=0, distraction=1, plan=RYAN_OK),
        line(case=0, distraction=2, plan=RYAN_WRONG),
        line(case=0, distraction=0, plan=RYAN_TEXTING),
        line(case=21, distraction=2, plan={}),
    ]
    assert list(score_lines(lines, benchmark)) == [
        {"case": 0, "distraction": 1, "passed": True, "error": None, "reason": None},
        {
            "case": 0,
            "distraction": 2,
            "passed": False,
            "error": None,
            "reason": (
                "Ryan: relationships ['look at table_3'] do not satisfy "
                "'close to table_3 || between chair_1 and chair_3'"
            ),
        },
        {
            "case": 0,
            "distraction": 0,
            "passed": False,
            "error": "unknown_action: unavailable action label 'text'",
            "reason": None,
        },
        {"case": 21, "distraction": 2, "passed": True, "error": None, "reason": None},
    ]


def test_distraction_defaults_to_level_0(benchmark: Benchmark) -> None:
    [missing, null] = score_lines([line(case=0, plan=RYAN_OK), line(case=0, distraction=None, plan=RYAN_OK)], benchmark)
    assert missing == null == {"case": 0, "distraction": 0, "passed": True, "error": None, "reason": None}


def test_null_plan_is_judged_not_rejected(benchmark: Benchmark) -> None:
    [allowed, not_allowed] = score_lines([line(case=21, plan=None), line(case=0, plan=None)], benchmark)
    assert allowed["passed"] is True and allowed["error"] is None
    assert not_allowed["error"].startswith("malformed_plan: ")


def test_python_json_literals_are_accepted(benchmark: Benchmark) -> None:
    [output] = score_lines(['{"case": 61, "plan": {"Franklin": {"sampled_position": [NaN, 1.0]}}}'], benchmark)
    assert output["passed"] is False and output["error"] is None
    assert output["reason"] == "Franklin: position (nan, 1.00) stands inside cabinet_1"  # NaN is never outside


def test_invalid_lines_get_their_own_error_and_scoring_continues(benchmark: Benchmark) -> None:
    lines = [
        "{not json",
        "",
        "[1, 2]",
        line(plan=RYAN_OK),
        line(case="0", plan=RYAN_OK),
        line(case=0),
        line(case=5, plan=RYAN_OK),
        line(case=0, distraction=-1, plan=RYAN_OK),
        line(case=0, distraction=1.0, plan=RYAN_OK),
        line(case=True, plan=RYAN_OK),
        line(case=0, plan=RYAN_OK),
    ]
    outputs = list(score_lines(lines, benchmark))
    assert len(outputs) == len(lines)
    for number, output in enumerate(outputs[:-1], start=1):
        assert output["passed"] is False
        assert output["error"].startswith("invalid_input: "), output
        assert f"line {number}" in output["error"]
    assert outputs[5]["case"] == 0 and "no 'plan'" in outputs[5]["error"]
    assert outputs[6]["error"] == "invalid_input: line 7: unknown case id 5"
    assert outputs[7]["case"] == 0 and outputs[7]["distraction"] == -1
    assert outputs[-1] == {"case": 0, "distraction": 0, "passed": True, "error": None, "reason": None}


def test_deeply_nested_json_does_not_crash(benchmark: Benchmark) -> None:
    [output] = score_lines(['{"case": 0, "plan": ' + "[" * 100_000 + "]" * 100_000 + "}"], benchmark)
    assert output["passed"] is False and output["error"] is not None


def test_summary_counts_scored_lines_only(benchmark: Benchmark) -> None:
    lines = [
        line(case=0, plan=RYAN_OK),
        line(case=0, plan=RYAN_WRONG),
        line(case=0, plan=RYAN_TEXTING),
        line(case=13, plan={"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_6"]}}),
        "garbage",
    ]
    summary = summarize_scores(score_lines(lines, benchmark))
    assert (summary.lines, summary.invalid) == (5, 1)
    assert summary.overall is not None
    assert (summary.overall.runs, summary.overall.passes, summary.overall.errors) == (4, 2, 1)
    assert summary.overall.success_rate == 0.5
    assert summary.overall.execution_rate == 0.75
    text = summary.text()
    assert "success 0.5" in text and "execution 0.75" in text and "1 invalid" in text


def test_summary_of_nothing(benchmark: Benchmark) -> None:
    summary = summarize_scores(score_lines(["nope"], benchmark))
    assert summary.overall is None
    assert summary.text() == "scored 0 of 1 lines (1 invalid)"


def test_a_level_above_the_cases_maximum_keeps_every_entry(benchmark: Benchmark) -> None:
    # The reference filters entries with `level <= L`, so any L at or above a case's maximum keeps them all: a PI
    # plan scored "at level 2" is judged exactly like one at level 0.
    plan = {"Theodore": {"target_action": ["idle"], "relationships": [], "sampled_position": [1.0, 2.0]}}
    at_0, at_2 = score_lines(
        [line(case=60, distraction=0, plan=plan), line(case=60, distraction=2, plan=plan)], benchmark
    )
    assert at_2 == {**at_0, "distraction": 2}
    assert at_2["error"] is None


# --- PI plans whose point edsb samples -------------------------------------------------------------------------------

ROBERT = {"Robert": {"target_action": ["idle"], "relationships": ["behind reception_desk_1"]}}  # case 67


def scored_cli(path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> list[dict[str, object]]:
    outcome = edsb_in_process(["score", path, "--data", DATA, *options], capsys)
    assert outcome.returncode == 0, outcome.stderr
    return [json.loads(text) for text in outcome.stdout.splitlines()]


def test_a_pi_plan_repeated_200_times_gives_200_reproducible_draws(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plans, head = tmp_path / "plans.jsonl", tmp_path / "head.jsonl"
    plans.write_text((line(case=67, plan=ROBERT) + "\n") * 200, encoding="utf-8")
    head.write_text((line(case=67, plan=ROBERT) + "\n") * 20, encoding="utf-8")

    first = scored_cli(plans, capsys, "--seed", "3")
    # A line's draw depends on the seed and its number only (next test): the first lines, scored again with the same
    # seed and with another, show what the whole file would.
    again = scored_cli(head, capsys, "--seed", "3")
    other = scored_cli(head, capsys, "--seed", "4")

    assert len(first) == 200
    assert again == first[:20]
    points = [tuple(o["sampled_positions"]["Robert"]) for o in first]  # type: ignore[index]
    assert len(set(points)) > 100  # independent draws, not one point repeated
    assert len(other) == 20
    assert all(o["sampled_positions"] != f["sampled_positions"] for o, f in zip(other, first[:20], strict=True))
    # the reference's annealer misses this area now and then; the optimiser never does
    assert 0 < sum(not o["passed"] for o in first) < 100
    assert all(o["passed"] for o in scored_cli(plans, capsys, "--sampler", "optimal"))


def test_a_line_s_draw_depends_on_the_seed_and_its_line_number_only(benchmark: Benchmark) -> None:
    sampler = line_sampler("reference", 5)
    alone = list(score_lines(["", line(case=67, plan=ROBERT)], benchmark, sampler))[1]
    among = list(score_lines([line(case=60, plan={}), line(case=67, plan=ROBERT)], benchmark, sampler))[1]
    assert alone == among
    scene = load_scene(benchmark, "Restaurant")
    expected = sample_position(
        scene, ROBERT["Robert"]["relationships"], characters=["Robert"], rng=generator_for("5/line-2")
    )
    assert alone["sampled_positions"] == {"Robert": list(expected)}


def test_given_points_are_judged_as_given_and_what_cannot_be_placed_is_an_execution_error(
    benchmark: Benchmark,
) -> None:
    sampler = line_sampler("reference", 0)
    given = {"Robert": {**ROBERT["Robert"], "sampled_position": [1.1, 0.56]}}
    unknown = {"Robert": {"target_action": ["idle"], "relationships": ["behind desk_99"]}}
    [judged, error, table1] = score_lines(
        [line(case=67, plan=given), line(case=67, plan=unknown), line(case=0, plan=RYAN_OK)], benchmark, sampler
    )
    assert "sampled_positions" not in judged and judged["passed"] is False
    assert error["error"] == "sampler_anchor: unknown anchor 'desk_99'"
    assert error["passed"] is False and "sampled_positions" not in error
    assert table1 == {"case": 0, "distraction": 0, "passed": True, "error": None, "reason": None}
    assert summarize_scores([judged, error]).overall.errors == 1  # type: ignore[union-attr]


def test_under_perturb_only_the_renamed_characters_are_sampled(tmp_path: Path, capsys) -> None:
    """`--perturb 3` renames case 60's Theodore: a plan under the old name is judged missing the new one, and no
    point is drawn (or shown) under a name the case does not have; under the new name it is sampled and passes."""
    [renamed] = [state.name for state in Benchmark.open(DATA, perturb=3).cases[60].states_at(0)]
    entry = {"target_action": [], "relationships": ["in front of fridge_1"]}
    plans = tmp_path / "plans.jsonl"
    plans.write_text(line(case=60, plan={"Theodore": entry}) + "\n" + line(case=60, plan={renamed: entry}) + "\n")
    old_name, new_name = scored_cli(plans, capsys, "--perturb", "3")
    assert old_name["error"] == f"missing_character: {renamed} not found in the planning result"
    assert "sampled_positions" not in old_name
    assert new_name["passed"] is True and list(new_name["sampled_positions"]) == [renamed]  # type: ignore[arg-type]
