"""Agreement with verdicts of the official evaluator on randomised plans (tests/data/scoring_reference_vectors.jsonl).

Each line holds an input of `edsb score` (case, distraction, plan) and what the reference evaluator returned for it
(`passed`, and the class of the exception it raised, if any). The plans were generated at random around the official
cases: correct plans with mutations, odd JSON shapes, PI points found by bisection on both sides of condition and
collision boundaries, non-finite coordinates.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from edsb.scoring.score_file import score_lines

VECTORS = Path(__file__).resolve().parents[1] / "data" / "scoring_reference_vectors.jsonl"

# The error kind each reference exception may be reported as. KeyError is a missing plan key or an unknown PI anchor.
KINDS_BY_EXCEPTION = {
    "CharacterNotFoundError": {"missing_character"},
    "UnavailableActionError": {"unknown_action"},
    "UnavailableRelationshipError": {"unknown_relationship"},
    "UnavailableAnchorError": {"unknown_anchor"},
    "SyntaxError": {"malformed_condition"},
    "KeyError": {"malformed_plan", "unknown_anchor"},
    "ValueError": {"malformed_plan", "unknown_predicate"},
    "TypeError": {"malformed_plan"},
    "AttributeError": {"malformed_plan"},
    "AssertionError": {"malformed_plan"},
    "OverflowError": {"malformed_plan"},
}


@pytest.fixture(scope="module")
def vectors() -> list[dict]:
    return [json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def outputs(vectors: list[dict], benchmark: Benchmark) -> list[dict]:
    lines = [json.dumps({key: vector[key] for key in ("case", "distraction", "plan")}) for vector in vectors]
    return list(score_lines(lines, benchmark))


def test_the_fixture_covers_every_outcome(vectors: list[dict]) -> None:
    outcomes = Counter((v["reference"]["passed"], v["reference"]["exception"]) for v in vectors)
    assert outcomes[(True, None)] > 300 and outcomes[(False, None)] > 300
    assert set(KINDS_BY_EXCEPTION) - {"UnavailableAnchorError", "SyntaxError"} <= {e for _, e in outcomes}
    assert {v["case"] for v in vectors} == {*range(5), *range(10, 15), *range(20, 25), *range(30, 35),
                                            *range(40, 45), *range(50, 55), *range(60, 70)}  # fmt: skip


def test_every_verdict_agrees_with_the_reference(vectors: list[dict], outputs: list[dict]) -> None:
    disagreements = [
        (vector, output)
        for vector, output in zip(vectors, outputs, strict=True)
        if (output["passed"], output["error"] is not None)
        != (vector["reference"]["passed"], vector["reference"]["exception"] is not None)
    ]
    assert not disagreements, f"{len(disagreements)} of {len(vectors)} disagree, first: {disagreements[0]}"


def test_error_kinds_name_the_reference_cause(vectors: list[dict], outputs: list[dict]) -> None:
    for vector, output in zip(vectors, outputs, strict=True):
        exception = vector["reference"]["exception"]
        if exception is not None and output["error"] is not None:
            assert output["error"].split(":")[0] in KINDS_BY_EXCEPTION[exception], (vector, output)
