"""Scores a JSON-lines file of plans against the official cases: the engine of `edsb score PLANS.jsonl`.

Input, one object per line: `{"case": 0, "distraction": 1, "plan": {...}}`, the plan in the official result format
`{character: {"target_action": [...], "relationships": [...], "sampled_position": [x, y] | null}}`.
`distraction` may be omitted (or null): it then means level 0, which every case has (§1.4) and which is the only
level of the PI cases. Output, one object per input line and in the same order:
`{"case": 0, "distraction": 1, "passed": true, "error": null, "reason": null}`, where `error` is
`"<kind>: <message>"` and `reason` says why a judged plan failed (which character, which condition).

A level above the case's maximum is judged like the maximum (the official filter keeps entries up to the level, so
nothing more is kept). A line that cannot be scored (invalid JSON, no `case` or `plan`, an unknown case id, a
negative level) gets an `invalid_input` error line and does not count in the summary; scoring carries on with the
next line.
A plan that is present but null is judged like any other value (case 21 accepts it as an empty plan).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from edsb.geometry.scene import Scene, load_scene
from edsb.scoring.judge import Judge
from edsb.scoring.metrics import Cell, ScoredRun, overall_cell
from edsb.scoring.verdict import Verdict

INVALID_INPUT = "invalid_input"
INTERNAL_ERROR = "internal_error"


class _InvalidLine(Exception):
    def __init__(self, message: str, case: int | None = None, level: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.case = case
        self.level = level


def _strict_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PlanScorer:
    """Judges plans line by line, loading each scene and building each (case, level) judge once."""

    def __init__(self, benchmark: Benchmark) -> None:
        self.benchmark = benchmark
        self._scenes: dict[str, Scene] = {}
        self._judges: dict[tuple[int, int], Judge] = {}

    def judge_for(self, case: TestCase, level: int) -> Judge:
        key = (case.id, level)
        if key not in self._judges:
            if case.scene_name not in self._scenes:
                self._scenes[case.scene_name] = load_scene(self.benchmark, case.scene_name)
            self._judges[key] = Judge(case, level, self._scenes[case.scene_name])
        return self._judges[key]

    def score_line(self, line: str, number: int) -> dict[str, Any]:
        try:
            case, level, plan = self._read(line, number)
        except _InvalidLine as invalid:
            return _output(invalid.case, invalid.level, False, f"{INVALID_INPUT}: {invalid.message}")
        try:
            verdict: Verdict = self.judge_for(case, level).judge(plan)
        except Exception as exc:  # a bug of ours must not stop a long scoring job; it is reported on its line
            return _output(case.id, level, False, f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}")
        return _output(case.id, level, verdict.passed, verdict.describe_error(), verdict.reason)

    def _read(self, line: str, number: int) -> tuple[TestCase, int, object]:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise _InvalidLine(f"line {number} is not valid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise _InvalidLine(f"line {number} is {type(record).__name__}, not a JSON object")
        case_id = _strict_int(record.get("case"))
        raw_level = record.get("distraction")
        level = 0 if raw_level is None else _strict_int(raw_level)
        if case_id is None:
            raise _InvalidLine(f"line {number} has no integer 'case'", None, level)
        if level is None:
            raise _InvalidLine(f"line {number}: 'distraction' must be an integer, got {raw_level!r}", case_id)
        if "plan" not in record:
            raise _InvalidLine(f"line {number} has no 'plan'", case_id, level)
        case = self.benchmark.cases.get(case_id)
        if case is None:
            raise _InvalidLine(f"line {number}: unknown case id {case_id}", case_id, level)
        if level < 0:
            raise _InvalidLine(f"line {number}: distraction levels start at 0, not {level}", case_id, level)
        return case, level, record["plan"]


def _output(
    case: int | None, level: int | None, passed: bool, error: str | None, reason: str | None = None
) -> dict[str, Any]:
    """`reason` says why a judged plan failed (character and condition); an error explains itself in `error`."""
    return {"case": case, "distraction": level, "passed": passed, "error": error, "reason": reason}


def score_lines(lines: Iterable[str], benchmark: Benchmark) -> Iterator[dict[str, Any]]:
    """One output object per input line, in order (blank lines included, so line numbers stay aligned)."""
    scorer = PlanScorer(benchmark)
    for number, line in enumerate(lines, start=1):
        yield scorer.score_line(line, number)


@dataclass(frozen=True, slots=True)
class ScoreSummary:
    lines: int
    invalid: int
    overall: Cell | None  # tag Total, level Total over the scored lines; None if nothing was scored

    def text(self) -> str:
        """One line for stderr."""
        if self.overall is None:
            return f"scored 0 of {self.lines} lines ({self.invalid} invalid)"
        cell = self.overall
        low, high = cell.success_interval.low, cell.success_interval.high
        invalid = f", {self.invalid} invalid lines skipped" if self.invalid else ""
        return (
            f"scored {cell.runs} plans: success {cell.success_rate} (95% CI {low:.2f}-{high:.2f}), "
            f"execution {cell.execution_rate}; {cell.passes} passed, {cell.runs - cell.passes - cell.errors} failed, "
            f"{cell.errors} execution errors{invalid}"
        )


def summarize_scores(outputs: Iterable[Mapping[str, Any]]) -> ScoreSummary:
    """The Total cell of §2.6 over the output lines of `score_lines`; invalid input lines are not runs."""
    lines = 0
    records: list[ScoredRun] = []
    for output in outputs:
        lines += 1
        error = output.get("error")
        if isinstance(error, str) and error.startswith(f"{INVALID_INPUT}:"):
            continue
        records.append(
            ScoredRun(
                case_id=output["case"],
                tags=(),
                level=output["distraction"],
                passed=bool(output["passed"]),
                errored=error is not None,
            )
        )
    return ScoreSummary(lines, lines - len(records), overall_cell(records) if records else None)
