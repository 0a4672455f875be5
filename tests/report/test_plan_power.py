"""`edsb plan-power` on pilot run directories written by hand: the cases and repeats a comparison needs, what the
benchmark's 40 cases allow, one pilot run as a bound and two as a paired measurement, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edsb.report.power import BENCHMARK_CASES, PLAN_REPEATS, fit_power_model
from tests.support.edsb_cli import edsb_in_process
from tests.support.run_dir import result_record, write_run_dir

CASES, LEVELS, REPEATS = 12, 3, 2


def pilot(tmp_path: Path, name: str, seed: int) -> Path:
    """A pilot of 12 cases × 3 levels × 2 repeats whose cases differ in difficulty (seeded)."""
    rng = np.random.default_rng(seed)
    difficulty = np.linspace(0.1, 0.9, CASES)
    records = [
        result_record("ours", case, ["OA"], level, repeat, "passed" if rng.random() < difficulty[case] else "failed")
        for case in range(CASES)
        for level in range(LEVELS)
        for repeat in range(REPEATS)
    ]
    return write_run_dir(tmp_path / name, records)


def plan_json(capsys, *args: str | Path) -> dict[str, Any]:
    code, out, err = edsb_in_process(["plan-power", *map(str, args), "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def test_a_paired_pilot_plans_cases_and_repeats(tmp_path: Path, capsys) -> None:
    a, b = pilot(tmp_path, "a", 1), pilot(tmp_path, "b", 2)
    plan = plan_json(capsys, a, b, "--difference", "0.1")
    assert (plan["difference"], plan["power"], plan["benchmark_cases"]) == (0.1, 0.8, BENCHMARK_CASES)
    ours = plan["variants"][0]
    assert (ours["variant"], ours["pilot_cases"], ours["pilot_repeats"], ours["paired"]) == ("ours", 12, 2, True)
    rows = {row["repeats"]: row for row in ours["rows"]}
    assert list(rows) == list(PLAN_REPEATS)
    # More repeats never need more cases, and shrink what 40 cases detect less and less.
    needed = [rows[r]["cases_needed"] for r in PLAN_REPEATS]
    assert needed == sorted(needed, reverse=True)
    at_40 = [rows[r]["detectable_at_benchmark"] for r in PLAN_REPEATS]
    assert at_40 == sorted(at_40, reverse=True) and at_40[0] - at_40[2] > at_40[2] - at_40[4]
    # The figures are the model's, fitted on the paired differences.
    code, out, _ = edsb_in_process(["plan-power", str(a), str(b), "--difference", "0.1"], capsys)
    assert code == 0 and "benchmark's 40 cases" in " ".join(out.split())
    assert "only repeats add data" in " ".join(out.split()) and "each doubling of the cases" in " ".join(out.split())
    assert "paired pilot" in out


def test_the_model_reproduces_the_pilots_own_variance() -> None:
    rng = np.random.default_rng(3)
    case = np.repeat(np.arange(CASES), LEVELS * REPEATS)
    level = np.tile(np.repeat(np.arange(LEVELS), REPEATS), CASES)
    values = (rng.random(case.size) < np.linspace(0.1, 0.9, CASES)[case]).astype(float)
    model = fit_power_model(values, case, level, paired=True)
    mean = values.mean()
    sums = np.bincount(case, weights=values - mean)
    cr1 = CASES / (CASES - 1) * (sums**2).sum() / values.size**2
    assert model.variance(CASES, REPEATS) == pytest.approx(cr1)  # at the pilot's own design, its CR1 variance
    assert fit_power_model(values, case, level, paired=False).variance(CASES, REPEATS) == pytest.approx(2 * cr1)


def test_one_pilot_run_is_a_bound_and_says_so(tmp_path: Path, capsys) -> None:
    a = pilot(tmp_path, "a", 1)
    ours = plan_json(capsys, a, "--difference", "0.2")["variants"][0]
    assert ours["paired"] is False
    _, out, _ = edsb_in_process(["plan-power", str(a), "--difference", "0.2"], capsys)
    assert "an upper bound" in " ".join(out.split())


def test_bad_input_is_one_clear_error(tmp_path: Path, capsys) -> None:
    a = pilot(tmp_path, "a", 1)
    edsb_in_process(["plan-power", str(a), "--difference", "0"], capsys).assert_one_clear_error(2, contains="(0, 1]")
    too_weak = ["plan-power", str(a), "--difference", "0.1", "--power", "0.3"]
    edsb_in_process(too_weak, capsys).assert_one_clear_error(2, contains="--power must be in [0.5, 1)")
    three = ["plan-power", str(a), str(a), str(a), "--difference", "0.1"]
    edsb_in_process(three, capsys).assert_one_clear_error(2, contains="one pilot run directory, or two")
    flat = write_run_dir(tmp_path / "flat", [result_record("ours", c, ["OA"], 0, 0, "passed") for c in range(5)])
    ours = plan_json(capsys, flat, "--difference", "0.1")["variants"][0]
    assert ours["rows"] == [] and "never vary" in ours["note"]
