"""`edsb data check` and the loader: counts on the real data, one clear line for every kind of damage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from tests.support.data import DATA
from tests.support.edsb_cli import edsb_in_process


def test_counts_on_the_official_data(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = edsb_in_process(["data", "check", "--data", str(DATA), "--json"], capsys)
    report = json.loads(out)
    assert code == 0
    assert report["cases"] == 40
    assert report["cases_by_tag"] == {"OA": 15, "RC": 15, "SS": 15, "PI": 10}
    assert report["objects"] == {"House": 23, "Office": 51, "Restaurant": 39}
    assert report["descriptions"] == {"House": 5, "Office": 5, "Restaurant": 5}
    assert report["problems"] == []


def test_case_facts_match_the_protocol() -> None:
    cases = Benchmark.open(DATA).cases
    assert sorted(cases) == [
        *range(5),
        *range(10, 15),
        *range(20, 25),
        *range(30, 35),
        *range(40, 45),
        *range(50, 55),
        *range(60, 70),
    ]
    assert [cid for cid, case in cases.items() if case.allow_null_plan] == [21]
    assert sorted(cid for cid, case in cases.items() if len(case.expected_plans) == 2) == [44, 53, 54]
    assert {case.max_distraction for case in cases.values() if "PI" not in case.tags} == {2}
    assert {case.max_distraction for case in cases.values() if "PI" in case.tags} == {0}
    # Kept characters / history at levels 0/1/2 for a few cases of the case table (docs/reference.md#case-table).
    for cid, chars, hist in [(20, (3, 5, 6), (2, 3, 5)), (52, (6, 8, 9), (1, 3, 6)), (44, (3, 5, 6), (1, 3, 5))]:
        case = cases[cid]
        assert tuple(len(case.states_at(level)) for level in range(3)) == chars
        assert tuple(len(case.history_at(level)) for level in range(3)) == hist


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda p: p.write_text('{"id": 0, "tags": ['), "testcase_0.json: invalid JSON"),
        (lambda p: p.write_text(p.read_text().replace('"id": 0', '"id": "zero"', 1)), "testcase_0.json: id:"),
        (
            lambda p: p.write_text(p.read_text().replace('"allow_null_plan": false', '"allow_null_plan": "no"')),
            "testcase_0.json: allow_null_plan:",
        ),
        (
            lambda p: p.write_text(p.read_text().replace('"scene_name": "House"', '"scene_name": "Garage"')),
            "testcase_0.json: scene_name:",
        ),
        (lambda p: p.unlink(), "testcase_0.json: missing"),
    ],
    ids=["truncated-json", "wrong-type", "bool-as-string", "unknown-scene", "missing-file"],
)
def test_damaged_case_file_gives_one_line(data_copy: Path, damage, expected: str, capsys) -> None:
    damage(data_copy / "benchmark/test_cases/0_OA/testcase_0.json")
    code, _, err = edsb_in_process(["data", "check", "--data", str(data_copy)], capsys)
    assert code == 1
    lines = err.strip().splitlines()
    assert any(expected in line for line in lines), lines
    assert all(line.startswith("edsb: error: ") for line in lines)
    assert "Traceback" not in err


def test_modified_but_valid_file_is_flagged_unless_allowed(data_copy: Path, capsys) -> None:
    path = data_copy / "configs/scenes/Office/descriptions/openai-gpt-4o-2024-08-06-0.1/description-3.txt"
    path.write_text(path.read_text() + "\nA new sentence.")
    code, _, err = edsb_in_process(["data", "check", "--data", str(data_copy)], capsys)
    assert code == 1 and "description-3.txt: sha256 differs" in err
    code, _, err = edsb_in_process(["data", "check", "--data", str(data_copy), "--allow-modified"], capsys)
    assert code == 0 and "warning:" in err


def test_corrupt_objects_file_names_the_field(data_copy: Path, capsys) -> None:
    path = data_copy / "configs/scenes/Office/objects.json"
    objects = json.loads(path.read_text())
    objects[3]["center"] = [1.0, 2.0]
    path.write_text(json.dumps(objects))
    code, _, err = edsb_in_process(["data", "check", "--data", str(data_copy)], capsys)
    assert code == 1
    assert "Office/objects.json: 3.center:" in err


def test_missing_data_dir_is_one_line(tmp_path: Path, capsys) -> None:
    code, _, err = edsb_in_process(["cases", "--data", str(tmp_path / "nowhere")], capsys)
    assert code == 1
    assert err.count("\n") == 1 and "no benchmark data at" in err and "edsb data fetch" in err


def test_env_var_points_at_the_data(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("EDSB_DATA", str(DATA))
    code, out, _ = edsb_in_process(["cases", "--json", "--cases", "PI"], capsys)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [row["id"] for row in rows] == list(range(60, 70))
    assert rows[0] == {
        "id": 60,
        "scene": "House",
        "tags": ["PI"],
        "max_distraction": 0,
        "characters": ["Theodore"],
        "allow_null_plan": False,
        "instruction": rows[0]["instruction"],
    }
