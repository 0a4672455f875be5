"""Scores a JSON-lines file of plans against the official cases: the engine of `edsb score PLANS.jsonl`.

Input, one object per line: `{"case": 0, "distraction": 1, "plan": {...}}`, the plan in the official result format
`{character: {"target_action": [...], "relationships": [...], "sampled_position": [x, y] | null}}`.
`distraction` may be omitted (or null): it then means level 0, which every case has
(docs/reference.md#distraction-levels) and which is the only level of the PI cases. Output, one object per input line
and in the same order: `{"case": 0, "distraction": 1, "passed": true, "error": null, "reason": null}`, where `error` is
`"<kind>: <message>"` and `reason` says why a judged plan failed (which character, which condition).

A level above the case's maximum is judged like the maximum (the official filter keeps entries up to the level, so
nothing more is kept). A line that cannot be scored (invalid JSON, no `case` or `plan`, an unknown case id, a
negative level) gets an `invalid_input` error line and does not count in the summary; scoring carries on with the
next line.
A plan that is present but null is judged like any other value (case 21 accepts it as an empty plan).

PI plans may leave the point to edsb: an entry of one of the case's characters with a list of `relationships` and no
`sampled_position` (absent or null) is sampled the way the pipeline samples it, when the caller passes a sampler
(`edsb score` always does; the sampler lives in `planning`, above this package, so it is handed in). The output line
then carries `"sampled_positions": {character: [x, y]}`; a relationship the sampler cannot place is an execution
error of that line, as it is of a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from edsb.geometry.scene import Scene, load_scene
from edsb.results import RunError
from edsb.scoring.judge import Judge
from edsb.scoring.metrics import Cell, ScoredRun, overall_cell
from edsb.scoring.verdict import Verdict

INVALID_INPUT = "invalid_input"
INTERNAL_ERROR = "internal_error"

#: (scene, {character: relationships}, the case's characters at the level, line number) → {character: (x, y)};
#: raises a RunError for what it cannot place. `edsb.planning.sampler.line_sampler` makes one.
PositionSampler = Callable[[Scene, Mapping[str, Sequence[str]], Collection[str], int], dict[str, tuple[float, float]]]


class _InvalidLine(Exception):
    def __init__(self, message: str, case: int | None = None, level: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.case = case
        self.level = level


def _strict_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PlanScorer:
    """Judges plans line by line, loading each scene and building each (case, level) judge once; with a
    `sampler`, PI entries that carry relationships but no point are sampled first."""

    def __init__(self, benchmark: Benchmark, sampler: PositionSampler | None = None) -> None:
        self.benchmark = benchmark
        self.sampler = sampler
        self._scenes: dict[str, Scene] = {}
        self._judges: dict[tuple[int, int], Judge] = {}

    def scene_for(self, case: TestCase) -> Scene:
        if case.scene_name not in self._scenes:
            self._scenes[case.scene_name] = load_scene(self.benchmark, case.scene_name)
        return self._scenes[case.scene_name]

    def judge_for(self, case: TestCase, level: int) -> Judge:
        key = (case.id, level)
        if key not in self._judges:
            self._judges[key] = Judge(case, level, self.scene_for(case))
        return self._judges[key]

    def score_line(self, line: str, number: int) -> dict[str, Any]:
        try:
            case, level, plan = self._read(line, number)
        except _InvalidLine as invalid:
            return _output(invalid.case, invalid.level, False, f"{INVALID_INPUT}: {invalid.message}")
        sampled: dict[str, list[float]] | None = None
        try:
            characters = [state.name for state in case.states_at(level)]
            wanted = _unplaced(plan, characters) if case.is_position_case and self.sampler is not None else {}
            if wanted:
                assert self.sampler is not None
                points = self.sampler(self.scene_for(case), wanted, characters, number)
                sampled = {name: list(point) for name, point in points.items()}
                assert isinstance(plan, dict)
                plan = {
                    name: {**entry, "sampled_position": sampled[name]} if name in sampled else entry
                    for name, entry in plan.items()
                }
            verdict: Verdict = self.judge_for(case, level).judge(plan)
        except RunError as exc:  # the sampler cannot place a relationship: the line's execution error
            return _output(case.id, level, False, f"{exc.kind}: {exc}")
        except Exception as exc:  # a bug of ours must not stop a long scoring job; it is reported on its line
            return _output(case.id, level, False, f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}")
        return _output(case.id, level, verdict.passed, verdict.describe_error(), verdict.reason, sampled=sampled)

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


def _unplaced(plan: object, characters: Collection[str]) -> dict[str, list[str]]:
    """{character: relationships} of the case's `characters` whose entries carry a list of relationship strings and
    no point. An entry for anyone else is not judged, so nothing is drawn for it (under `--perturb`, a plan under
    the original names gets no point under a name that its error line does not give)."""
    if not isinstance(plan, dict):
        return {}
    wanted = {}
    for name, entry in plan.items():
        if name not in characters or not isinstance(entry, dict) or entry.get("sampled_position") is not None:
            continue
        relationships = entry.get("relationships")
        if isinstance(relationships, list) and all(isinstance(r, str) for r in relationships):
            wanted[name] = relationships
    return wanted


def _output(
    case: int | None,
    level: int | None,
    passed: bool,
    error: str | None,
    reason: str | None = None,
    *,
    sampled: Mapping[str, list[float]] | None = None,
) -> dict[str, Any]:
    """`reason` says why a judged plan failed (character and condition); an error explains itself in `error`.
    `sampled` (the points edsb sampled for the line, if any) becomes `sampled_positions`."""
    output: dict[str, Any] = {"case": case, "distraction": level, "passed": passed, "error": error, "reason": reason}
    if sampled:
        output["sampled_positions"] = dict(sampled)
    return output


def score_lines(
    lines: Iterable[str], benchmark: Benchmark, sampler: PositionSampler | None = None
) -> Iterator[dict[str, Any]]:
    """One output object per input line, in order (blank lines included, so line numbers stay aligned)."""
    scorer = PlanScorer(benchmark, sampler)
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
    """The Total cell (docs/reference.md#aggregation) over the output lines of `score_lines`; invalid input lines are
    not runs."""
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
