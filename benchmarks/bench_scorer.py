"""Scorer throughput: verdicts per second of the judge on a large generated plan set, and a digest of every verdict.

The plans are generated around all 40 official cases at every distraction level: the expected plans' correct
answers, wrong anchors, wrong and unknown actions, malformed plans of every shape the judge rejects, and for the PI
cases random points inside and outside the expected area (some inside furniture). They are judged through
`edsb.scoring.score_file.PlanScorer`, which builds one judge per (case, level), as `edsb score` does.

The digest covers every verdict field (passed, error kind, message, reason) in plan order; the set is generated
from a fixed seed, so the digest must stay the same whenever the judge is changed for speed.

The judge of the commit this benchmark was added with (before any speed work) gave digest 79089c305a32d3c3 for the
default set and 753bcfa22a9cbeac for the smoke set.

Usage: EDSB_DATA=/path/to/edsb-data python benchmarks/bench_scorer.py [--plans 100000] [--repeats 3] [--smoke]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from edsb.scoring.conditions import iter_atoms, parse_condition
from edsb.scoring.score_file import PlanScorer

TARGET_VERDICTS_PER_S = 20_000


def _atoms(condition: str | None) -> list[str]:
    return [atom for atom in iter_atoms(parse_condition(condition))] if condition else []


def _templates(case: TestCase, level: int, object_names: list[str]) -> list[tuple[str, Any]]:
    """(kind, plan) pairs for one case and level; PI positions are filled in per plan (None here)."""
    characters = [expected.character for expected in case.expected_plans]
    labels = list(case.action_labels)

    def plan_of(actions: Any, relationships: Any, position: Any = None) -> dict[str, Any]:
        return {
            name: {"target_action": actions, "relationships": relationships, "sampled_position": position}
            for name in characters
        }

    expected = case.expected_plans[0]
    actions = [atom for atom in _atoms(expected.target_action) if not atom.startswith("!")] or labels[:1]
    relationships = _atoms(expected.relationships)
    mentioned = {atom.split(" ")[-1] for atom in relationships}
    stranger = next(name for name in object_names if name not in mentioned)
    wrong_anchor = [" ".join([*atom.split(" ")[:-1], stranger]) for atom in relationships] or [f"close to {stranger}"]
    wrong_action = [label for label in labels if label not in actions][:1] or ["sit"]
    templates: list[tuple[str, Any]] = [
        *[("correct", plan_of(actions, relationships))] * 4,
        *[("correct_first_branch", plan_of(actions[:1], relationships[:1]))] * 2,
        *[("wrong_anchor", plan_of(actions, wrong_anchor))] * 3,
        *[("wrong_action", plan_of(wrong_action, relationships))] * 2,
        ("unknown_action", plan_of(["fly"], relationships)),
        ("unknown_relationship", plan_of(actions, ["hover over the table"])),
        ("letters", plan_of(actions[0], relationships[0] if relationships else "close to x")),
        ("missing_character", {"Nobody": plan_of(actions, relationships)[characters[0]]}),
        ("null_plan", None),
        ("empty_plan", {}),
        ("not_an_object", {name: "sit" for name in characters}),
        ("no_relationships", {name: {"target_action": actions} for name in characters}),
        ("number_action", plan_of([3], relationships)),
    ]
    if case.is_position_case:
        templates += [
            *[("pi_point", plan_of([], [], "point"))] * 12,
            *[("pi_inside", plan_of([], [], "inside"))] * 12,
            ("pi_malformed", plan_of([], [], [1.0])),
            ("pi_malformed", plan_of([], [], "abc")),
            ("pi_nan", plan_of([], [], [float("nan"), 1.0])),
            ("pi_null", plan_of([], [], None)),
        ]
    return templates


def generate(
    benchmark: Benchmark, scorer: PlanScorer, count: int, seed: int = 0
) -> list[tuple[str, TestCase, int, Any]]:
    """`count` (kind, case, level, plan) tuples drawn from every case and level, reproducibly from `seed`."""
    rng = np.random.default_rng(seed)
    pool: list[tuple[str, TestCase, int, Any]] = []
    inside: dict[tuple[int, int], np.ndarray] = {}
    for case in sorted(benchmark.cases.values(), key=lambda c: c.id):
        for level in range(case.max_distraction + 1):
            judge = scorer.judge_for(case, level)
            names = [box.name for box in judge.scene.objects]
            pool += [(kind, case, level, plan) for kind, plan in _templates(case, level, names)]
            if case.is_position_case:
                low, high = judge.scene.bounds[0, :2], judge.scene.bounds[1, :2]
                candidates = rng.uniform(low, high, size=(20_000, 2)).astype(np.float32)
                inside[case.id, level] = candidates[judge.position_pass_mask(candidates)]
    plans = []
    for index in rng.integers(len(pool), size=count):
        kind, case, level, plan = pool[index]
        if case.is_position_case and isinstance(plan, dict):
            plan = {name: dict(entry) if isinstance(entry, dict) else entry for name, entry in plan.items()}
            for entry in plan.values():
                if not isinstance(entry, dict):
                    continue
                if entry.get("sampled_position") == "point":
                    judge = scorer.judge_for(case, level)
                    low, high = judge.scene.bounds[0, :2], judge.scene.bounds[1, :2]
                    entry["sampled_position"] = [float(v) for v in rng.uniform(low, high)]
                elif entry.get("sampled_position") == "inside":
                    points = inside[case.id, level]
                    entry["sampled_position"] = [float(v) for v in points[rng.integers(len(points))]]
        plans.append((kind, case, level, plan))
    return plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=100_000, help="plans in the generated set")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the set; the fastest counts")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (2,000 plans) that finishes in seconds")
    args = parser.parse_args()
    count = 2_000 if args.smoke else args.plans
    load = os.getloadavg()[0]
    benchmark = Benchmark.open(Path(os.environ["EDSB_DATA"]))
    scorer = PlanScorer(benchmark)
    plans = generate(benchmark, scorer, count)

    elapsed, digests = float("inf"), set()
    for _ in range(args.repeats):  # the fastest pass: the machine is shared, the work is identical
        digest = hashlib.sha256()
        outcomes: Counter[str] = Counter()
        began = time.perf_counter()
        for _, case, level, plan in plans:
            verdict = scorer.judge_for(case, level).judge(plan)
            digest.update(repr((verdict.passed, verdict.error, verdict.message, verdict.reason)).encode())
            outcomes["passed" if verdict.passed else ("error" if verdict.errored else "failed")] += 1
        elapsed = min(elapsed, time.perf_counter() - began)
        digests.add(digest.hexdigest()[:16])
    assert len(digests) == 1, "the same plans got different verdicts in two passes"

    rate = count / elapsed
    kinds = Counter(kind for kind, *_ in plans)
    pi = sum(1 for _, case, _, _ in plans if case.is_position_case)
    print(f"plans: {count} ({pi} PI, {len(kinds)} kinds; {outcomes['passed']} passed, {outcomes['failed']} failed, "
          f"{outcomes['error']} errors)")  # fmt: skip
    print(f"verdicts_per_s: {rate:.0f} (ratio {rate / TARGET_VERDICTS_PER_S:.2f} of target, target >= 1.00)")
    print(f"us_per_verdict: {1e6 * elapsed / count:.1f} (ratio {elapsed / count * TARGET_VERDICTS_PER_S:.2f} of "
          f"budget, target <= 1.00)")  # fmt: skip
    print(f"verdict_digest: {digests.pop()}")
    print(f"machine: {os.cpu_count()} cores, load average at start {load:.2f}")


if __name__ == "__main__":
    main()
