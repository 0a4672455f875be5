"""`edsb compare` on run directories written by hand: runs paired on their run key, differences with case-clustered
intervals and p-values, discordant pairs, coverage differences counted, and the same table in every format."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from edsb.report.compare.paired import pair_results
from edsb.results import RunResult
from edsb.results.migrate import current_result
from tests.support.edsb_cli import edsb_in_process
from tests.support.run_dir import result_record, write_run_dir

# Three cases, two runs each (level 0 and 1, repeat 0). Paired differences other − base: case 0: +1 and 0,
# case 3: 0 and 0, case 5: −1 and +1. Case 0 is OA, cases 3 and 5 are RC and SS.
TAGS = {0: ["OA"], 3: ["RC", "SS"], 5: ["RC", "SS"]}
BASE = {(0, 0): "failed", (0, 1): "passed", (3, 0): "passed", (3, 1): "error", (5, 0): "passed", (5, 1): "failed"}
OTHER = {(0, 0): "passed", (0, 1): "passed", (3, 0): "passed", (3, 1): "error", (5, 0): "failed", (5, 1): "passed"}


def records(outcomes: dict[tuple[int, int], str], variant: str = "ours", **extra: Any) -> list[dict[str, Any]]:
    return [
        result_record(variant, case, TAGS[case], level, 0, status, **extra)
        for (case, level), status in outcomes.items()
    ]


@pytest.fixture
def base_and_other(tmp_path: Path) -> tuple[Path, Path]:
    return write_run_dir(tmp_path / "base", records(BASE)), write_run_dir(tmp_path / "other", records(OTHER))


def compare_json(capsys, *args: str | Path) -> dict[str, Any]:
    code, out, err = edsb_in_process(["compare", *map(str, args), "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)


def rows_by_group(data: dict[str, Any], index: int = 0) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["variant"], r["tag"], r["distraction"]): r for r in data["comparisons"][index]["rows"]}


def test_paired_difference_by_hand(base_and_other: tuple[Path, Path], capsys) -> None:
    data = compare_json(capsys, *base_and_other)
    total = rows_by_group(data)[("ours", "Total", "Total")]
    mean = 1 / 6
    sums = [1 - 2 * mean, -2 * mean, -2 * mean]  # residual sum of each case
    se = math.sqrt(3 / 2 * sum(s * s for s in sums) / 36)  # CR1, G = 3
    success = total["success"]
    assert (total["pairs"], total["cases"]) == (6, 3)
    assert success["base_rate"] == pytest.approx(3 / 6) and success["run_rate"] == pytest.approx(4 / 6)
    assert success["difference"] == pytest.approx(mean)
    assert success["standard_error"] == pytest.approx(se)
    # Three cases are too few for the clustered interval: the exact sign-flip test over cases. Of the 7 nonempty
    # sets of cases, 3 have a mean difference ≤ 0 and all 7 one ≥ 0 (case sums +1, 0, 0), so p = 2 · 4/8 = 1;
    # with 8 sign patterns none can reach p < 0.05, so the interval is every difference.
    assert success["interval"] == [-1.0, 1.0] and success["p_value"] == 1.0
    assert success["method"] == "sign-flip over cases" and success["reason"] == "fewer than 10 cases"
    assert success["detectable_difference"] is None
    assert success["finding"] == "nothing detectable: 3 cases cannot reach p < 0.05"
    assert (success["base_only"], success["run_only"]) == (1, 2)  # case 5 level 0; case 0 level 0, case 5 level 1
    # Execution: case 3 level 1 errs in both runs, so the difference is 0 and no pair is discordant.
    execution = total["execution"]
    assert execution["difference"] == 0.0 and (execution["base_only"], execution["run_only"]) == (0, 0)
    # Per tag: OA is case 0 alone (one cluster: no interval), RC and SS are cases 3 and 5.
    oa = rows_by_group(data)[("ours", "OA", "Total")]["success"]
    assert oa["difference"] == pytest.approx(0.5) and oa["interval"] == [-1.0, 1.0] and oa["p_value"] == 1.0
    assert oa["reason"] == "one case" and oa["standard_error"] is None
    assert rows_by_group(data)[("ours", "RC", "Total")]["success"]["difference"] == pytest.approx(0.0)
    assert {
        (d["case"], tuple(d["base_only"]), tuple(d["run_only"])) for d in data["comparisons"][0]["discordant_cases"]
    } == {
        (0, (), ("ours/tc00-d0-r0",)),
        (5, ("ours/tc05-d0-r0",), ("ours/tc05-d1-r0",)),
    }


def test_a_run_compared_with_itself(base_and_other: tuple[Path, Path], capsys) -> None:
    base, _ = base_and_other
    data = compare_json(capsys, base, base)
    assert data["comparisons"][0]["coverage"]["pairs"] == 6
    for row in data["comparisons"][0]["rows"]:
        for metric in ("success", "execution"):
            d = row[metric]
            assert d["difference"] == 0.0 and (d["base_only"], d["run_only"]) == (0, 0)
            # Three cases (one for OA) are too few to rule out any difference: the exact interval is [−1, 1].
            assert d["interval"] == [-1.0, 1.0] and d["p_value"] == 1.0
    assert data["comparisons"][0]["discordant_cases"] == []
    _, out, err = edsb_in_process(["compare", str(base), str(base), "--format", "markdown"], capsys)
    assert err == ""
    assert "| ours | Total | success | 6 | 0.50 → 0.50 | +0.00 [-1.00, +1.00]* | 1.000 | 0 / 0 |" in out
    assert "| ours | Total | success | - | nothing detectable: 3 cases cannot reach p < 0.05 |" in out


def test_every_format_carries_the_same_table(base_and_other: tuple[Path, Path], capsys) -> None:
    data = compare_json(capsys, *base_and_other)
    total = rows_by_group(data)[("ours", "Total", "Total")]["success"]
    _, out, _ = edsb_in_process(["compare", *map(str, base_and_other), "--format", "csv"], capsys)
    table = list(csv.DictReader(io.StringIO(out)))
    assert all(None not in row.values() for row in table)
    by_key = {(r["run"], r["variant"], r["tag"], r["distraction"], r["metric"]): r for r in table}
    assert len(by_key) == len(table)
    line = by_key[("other", "ours", "Total", "Total", "success")]
    assert float(line["difference"]) == pytest.approx(total["difference"], abs=1e-4)
    assert float(line["difference_low"]) == pytest.approx(total["interval"][0], abs=1e-4)
    assert float(line["p_value"]) == pytest.approx(total["p_value"], abs=1e-4)
    assert (line["base"], line["pairs"], line["base_only"], line["run_only"]) == ("base", "6", "1", "2")
    assert float(line["rate"]) == pytest.approx(4 / 6, abs=1e-4)
    assert by_key[("base", "ours", "Total", "Total", "success")]["difference"] == ""  # the first run: no pair
    leader = {(e["run"], e["tag"]): e for e in data["leaderboard"] if e["level"] == "Total"}
    assert leader[("base", "Total")]["cell"] == "0.5 (0.83)" and leader[("other", "Total")]["cell"] == "0.67 (0.83)"
    _, markdown, _ = edsb_in_process(["compare", *map(str, base_and_other), "--format", "markdown"], capsys)
    low, high = total["interval"]
    assert f"| ours | Total | success | 6 | 0.50 → 0.67 | +0.17 [{low:+.2f}, {high:+.2f}]* |" in markdown
    assert "| base | 0.5 (0.83) [" in markdown and "| other | ours | 5 | d0-r0 | d1-r0 |" in markdown
    written = base_and_other[0].parent / "compare.md"
    code, _, err = edsb_in_process(
        ["compare", *map(str, base_and_other), "--format", "markdown", "-o", str(written)], capsys
    )
    assert code == 0 and written.read_text() == markdown and "comparison written to" in err
    code, _, _ = edsb_in_process(["compare", *map(str, base_and_other), "-o", str(written)], capsys)
    assert code == 0 and f"+0.17 [{low:+.2f}, {high:+.2f}]" in written.read_text()  # the table, as text


def test_by_level(base_and_other: tuple[Path, Path], capsys) -> None:
    data = compare_json(capsys, *base_and_other, "--by-level")
    rows = rows_by_group(data)
    assert rows[("ours", "Total", "0")]["pairs"] == 3 and rows[("ours", "Total", "1")]["pairs"] == 3
    assert rows[("ours", "Total", "0")]["success"]["difference"] == pytest.approx(0.0)  # +1, 0, −1
    assert rows[("ours", "Total", "1")]["success"]["difference"] == pytest.approx(1 / 3)
    assert ("ours", "Total", "0") not in rows_by_group(compare_json(capsys, *base_and_other))


def test_different_coverage_pairs_the_shared_keys_and_says_what_was_left_out(tmp_path: Path, capsys) -> None:
    base = [
        *records(BASE),
        result_record("ours", 0, ["OA"], 2, 0, "passed"),  # a level the other run lacks
        result_record("ours", 3, ["RC", "SS"], 0, 1, "incomplete", error_kind="transport_timeout"),
    ]
    other = [
        *records(OTHER),
        result_record("ours", 7, ["OA"], 0, 0, "passed"),  # cases the base run lacks
        result_record("ours", 8, ["OA"], 0, 0, "failed"),
        result_record("ours", 0, ["OA"], 2, 0, "incomplete", error_kind="internal_error"),
    ]
    base_dir, other_dir = write_run_dir(tmp_path / "a", base), write_run_dir(tmp_path / "b", other)
    code, out, err = edsb_in_process(["compare", str(base_dir), str(other_dir), "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["comparisons"][0]["coverage"] == {
        "pairs": 6, "only_base": 1, "only_run": 2, "incomplete_base": 1, "incomplete_run": 1,
    }  # fmt: skip
    assert "warning: b vs a: 6 runs paired; left out: 1 judged run of a without a judged partner in b, 2 of b" in err
    assert "incomplete runs never pair: 1 in a, 1 in b" in err
    _, markdown, _ = edsb_in_process(["compare", str(base_dir), str(other_dir), "--format", "markdown"], capsys)
    assert (
        "over 6 shared runs (left out: 1 judged only in a, 2 judged only in b, 1 incomplete in a, 1 incomplete in b)"
        in markdown
    )
    assert rows_by_group(json.loads(out))[("ours", "Total", "Total")]["success"]["difference"] == pytest.approx(1 / 6)


def test_no_shared_keys_is_one_clear_error(base_and_other: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    elsewhere = write_run_dir(tmp_path / "scene-graph-only", records(OTHER, variant="scene-graph"))
    outcome = edsb_in_process(["compare", str(base_and_other[0]), str(elsewhere)], capsys)
    outcome.assert_one_clear_error(2, contains="share no judged run key")
    never_answered = records(dict.fromkeys(BASE, "incomplete"), error_kind="transport_timeout")
    only_incomplete = write_run_dir(tmp_path / "incomplete", never_answered)
    edsb_in_process(["compare", str(base_and_other[0]), str(only_incomplete)], capsys).assert_one_clear_error(2)


def test_pairing_is_by_run_key_never_by_names() -> None:
    """A perturbed run renames the characters of a case; its runs pair with the original's on the key alone,
    whatever order the lines come in."""
    original = [RunResult.model_validate(current_result(r)) for r in records(BASE)]
    renamed = [
        RunResult.model_validate(
            current_result({**r, "plan": {"Zoe": {"target_action": ["sit"], "relationships": []}}})
        )
        for r in reversed(records(OTHER))
    ]
    pairing = pair_results(original, renamed)
    assert pairing.coverage.pairs == 6 and pairing.coverage.complete
    assert all(a.run_key == b.run_key for a, b in pairing.pairs)
    assert [(a.status, b.status) for a, b in pairing.pairs] == [
        (BASE[(a.case, a.distraction)], OTHER[(a.case, a.distraction)]) for a, _ in pairing.pairs
    ]


def test_three_runs_compare_each_later_one_with_the_first(
    base_and_other: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    third = write_run_dir(tmp_path / "third", records(BASE))
    data = compare_json(capsys, base_and_other[0], base_and_other[1], third)
    assert [c["run"] for c in data["comparisons"]] == ["other", "third"]
    assert rows_by_group(data, 1)[("ours", "Total", "Total")]["success"]["difference"] == 0.0
    assert [r["name"] for r in data["runs"]] == ["base", "other", "third"]


def test_runs_sampled_by_different_pi_samplers_are_named_in_a_warning(tmp_path: Path, capsys) -> None:
    pi = [result_record("scene-graph", 60, ["PI"], 0, r, "passed") for r in range(2)]
    base, other = write_run_dir(tmp_path / "annealer", pi), write_run_dir(tmp_path / "optimiser", pi)
    config = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps(config | {"sampler": "reference"}))
    code, _, err = edsb_in_process(["compare", str(base), str(other)], capsys)
    assert code == 0
    # a directory without the field was written before --sampler existed: the optimiser sampled it
    assert "different samplers (annealer: reference, optimiser: optimal)" in " ".join(err.split())
    _, _, err = edsb_in_process(["compare", str(other), str(other)], capsys)
    assert "different samplers" not in err


def test_twelve_cases_get_the_clustered_interval_and_state_what_they_could_detect(tmp_path: Path, capsys) -> None:
    """Twelve cases of two runs each (levels 0 and 1): from 10 cases on, the CR1 interval with t (11 df); the
    detectable difference is (t_0.975 + t_0.8) · SE, and a row that finds nothing says how large a difference it
    would have found."""
    base_outcomes = {(c, level): "passed" if (c + level) % 3 else "failed" for c in range(12) for level in (0, 1)}
    other_outcomes = {(c, level): "passed" if (c * level + c) % 4 else "failed" for c in range(12) for level in (0, 1)}
    as_records = [
        [result_record("ours", c, ["OA"], level, 0, status) for (c, level), status in outcomes.items()]
        for outcomes in (base_outcomes, other_outcomes)
    ]
    base, other = write_run_dir(tmp_path / "base", as_records[0]), write_run_dir(tmp_path / "other", as_records[1])
    success = rows_by_group(compare_json(capsys, base, other))[("ours", "Total", "Total")]["success"]
    assert success["method"] == "clustered" and success["reason"] is None
    assert success["detectable_difference"] == pytest.approx((2.2009852 + 0.8755300) * success["standard_error"])
    assert success["p_value"] >= 0.05 and success["interval"][0] < 0 < success["interval"][1]
    finding = f"no difference larger than {success['detectable_difference']:.2f} detected"
    assert success["finding"] == finding
    _, markdown, _ = edsb_in_process(["compare", str(base), str(other), "--format", "markdown"], capsys)
    assert f"| ours | Total | success | {success['detectable_difference']:.2f} | {finding} |" in markdown
    low, high = success["interval"]
    assert f"[{low:+.2f}, {high:+.2f}] |" in markdown  # the clustered interval: no mark
    _, out, _ = edsb_in_process(["compare", str(base), str(other), "--format", "csv"], capsys)
    line = next(r for r in csv.DictReader(io.StringIO(out)) if r["run"] == "other" and r["metric"] == "success")
    assert float(line["detectable_difference"]) == pytest.approx(success["detectable_difference"], abs=1e-4)
    assert (line["interval_method"], line["difference_method"]) == ("clustered", "clustered")


def test_a_four_run_smoke_against_its_negative_control_prints_no_certain_interval(tmp_path: Path, capsys) -> None:
    """Cases 13 (three levels) and 60: the base passes all four runs, the other fails them. Every interval printed
    has width, is marked, and agrees with its p-value: two cases cannot reach p < 0.05."""
    cases = [(13, ["RC"], level) for level in (0, 1, 2)] + [(60, ["PI"], 0)]
    passing, failing = (
        write_run_dir(tmp_path / name, [result_record("ours", c, tags, level, 0, status) for c, tags, level in cases])
        for name, status in (("oracle", "passed"), ("wrong", "failed"))
    )
    _, out, _ = edsb_in_process(["compare", str(passing), str(failing), "--format", "markdown"], capsys)
    assert "| oracle | 1.0 (1.0) [0.51, 1.00]* |" in out and "| wrong | 0.0 (1.0) [0.00, 0.49]* |" in out
    assert "| ours | Total | success | 4 | 1.00 → 0.00 | -1.00 [-1.00, +1.00]* | 0.500 | 4 / 0 |" in out
    assert "every case has the same mean difference: no variance between cases" in out
    for row in rows_by_group(compare_json(capsys, passing, failing)).values():
        for metric in ("success", "execution"):
            low, high = row[metric]["interval"]
            assert low < high and (low > 0 or high < 0) == (row[metric]["p_value"] < 0.05)
