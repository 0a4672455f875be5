"""Position sampler: time per PI sample and hit rate, against a plain simulated annealer on the same cost.

Each of the 10 PI cases is sampled as the pipeline samples it (`sample_position` with the case's characters as free
anchors and a generator per run) for the relationships a good model writes: the expected condition's atoms (case 63
takes its feasible branch). A sample hits when the judge passes the plan that stands there. The baseline minimises
the same cost (`edsb.planning.sampler.compile_cost`, box collisions) one point at a time: a uniform random start in
the allowed area, Gaussian proposals, Metropolis acceptance with geometric cooling, stopping after 5,000 proposals or
as soon as the cost reaches 0, its minimum; its answer is the best point it met. Both run in this process, one after
the other, on the same seeds; the scene lattices the sampler keeps per scene are built before the timing starts and
their one-off cost is printed apart. The sampler keeps the search result per relationship set, so the repeats of
a case (here: the seeds) only draw from it; `cold` figures clear that cache before every sample.

Usage: EDSB_DATA=/path/to/edsb-data python benchmarks/bench_sampler.py [--seeds 20] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from edsb.geometry.scene import Scene, load_scene
from edsb.planning import sampler
from edsb.planning.sampler import PositionCost, compile_cost, sample_position
from edsb.scoring.conditions import iter_atoms, parse_condition
from edsb.scoring.judge import Judge

FEASIBLE_BRANCH = {63: ["in front of couch_1", "in front of couch_3"]}  # `(a || b) && c`: a and c can hold together
PROPOSALS = 5_000
STEP = 0.5  # metres, the proposals' standard deviation
START_TEMPERATURE = 1.0
COOLING = 0.999  # per proposal: 5,000 proposals end near 0.0067
TARGET_SPEEDUP = 50.0
TARGET_HIT_RATE = 0.99


def anneal(cost: PositionCost, scene: Scene, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(best point met, proposals made): Metropolis with geometric cooling, stopping early at cost 0."""
    low, high = scene.allowed_xy
    current = rng.uniform(low, high).astype(np.float32)
    current_cost = cost(current[None])[0]
    best, best_cost = current, current_cost
    temperature, proposals = START_TEMPERATURE, 0
    with np.errstate(over="ignore", invalid="ignore"):
        while proposals < PROPOSALS and best_cost > 0.0:
            proposals += 1
            proposal = (current + rng.normal(0.0, STEP, 2)).astype(np.float32)
            proposal_cost = cost(proposal[None])[0]
            if proposal_cost <= current_cost or rng.random() < np.exp((current_cost - proposal_cost) / temperature):
                current, current_cost = proposal, proposal_cost
                if current_cost < best_cost:
                    best, best_cost = current, current_cost
            temperature *= COOLING
    return best, proposals


def good_relationships(case: TestCase) -> list[str]:
    condition = case.expected_plans[0].sampled_position
    assert isinstance(condition, str)
    return FEASIBLE_BRANCH.get(case.id, list(iter_atoms(parse_condition(condition))))


def hits(judge: Judge, relationships: list[str], points: list[tuple[float, float]]) -> int:
    """How many points the judge passes, each as the plan a run would hand it."""
    name = judge.case.expected_plans[0].character
    plans = ({name: {"target_action": [], "relationships": relationships, "sampled_position": list(p)}} for p in points)
    return sum(judge.judge(plan).passed for plan in plans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="samples per case and method")
    parser.add_argument("--smoke", action="store_true", help="2 seeds per case: a run of a few seconds")
    args = parser.parse_args()
    seeds = 2 if args.smoke else args.seeds
    load = os.getloadavg()[0]
    benchmark = Benchmark.open(Path(os.environ["EDSB_DATA"]))
    cases = [case for case in sorted(benchmark.cases.values(), key=lambda c: c.id) if case.is_position_case]

    began = time.perf_counter()
    scenes = {case.scene_name: load_scene(benchmark, case.scene_name) for case in cases}
    for scene in scenes.values():
        sampler._lattice_of(scene)  # the per-scene lattice and its collisions, built once per process
    setup = (time.perf_counter() - began) / len(scenes)

    totals = {"sampler": [0.0, 0], "cold": [0.0, 0], "annealing": [0.0, 0]}
    same = 0
    proposals = 0
    print(f"{'case':>4}  {'sampler ms':>10}  {'hits':>5}  {'cold ms':>8}  {'annealing ms':>12}  {'hits':>5}  "
          f"{'proposals':>9}")  # fmt: skip
    for case in cases:
        scene = scenes[case.scene_name]
        judge = Judge(case, 0, scene)
        relationships = good_relationships(case)
        characters = [state.name for state in case.states_at(0)]
        cost = compile_cost(scene, relationships, characters=characters)
        row, case_proposals, drawn = [], 0, {}
        for method in ("sampler", "cold", "annealing"):
            points, elapsed = [], 0.0
            for seed in range(seeds):
                rng = np.random.default_rng([seed, case.id])
                if method == "cold":
                    sampler._optimum.cache_clear()
                start = time.perf_counter()
                if method != "annealing":
                    points.append(sample_position(scene, relationships, characters=characters, rng=rng))
                else:
                    point, made = anneal(cost, scene, rng)
                    points.append((float(point[0]), float(point[1])))
                    case_proposals += made
                elapsed += time.perf_counter() - start
            drawn[method] = points
            hit = hits(judge, relationships, points)
            totals[method][0] += elapsed
            totals[method][1] += hit
            row.append((1000 * elapsed / seeds, hit))
        (ms, hit), (cold_ms, _), (annealing_ms, annealing_hit) = row
        proposals += case_proposals
        same += sum(a == b for a, b in zip(drawn["sampler"], drawn["cold"], strict=True))
        print(f"{case.id:>4}  {ms:>10.3f}  {hit:>2}/{seeds:<2}  {cold_ms:>8.3f}  {annealing_ms:>12.1f}  "
              f"{annealing_hit:>2}/{seeds:<2}  {case_proposals / seeds:>9.0f}")  # fmt: skip

    samples = len(cases) * seeds
    (sampler_s, sampler_hits), (annealing_s, annealing_hits) = totals["sampler"], totals["annealing"]
    cold_s = totals["cold"][0]
    sampler_ms, cold_ms, annealing_ms = (1000 * t / samples for t in (sampler_s, cold_s, annealing_s))
    print(f"speedup_vs_annealing: {annealing_s / sampler_s:.1f} (ratio of {annealing_ms:.2f} to {sampler_ms:.3f} ms "
          f"per sample, target >= {TARGET_SPEEDUP:.0f})")  # fmt: skip
    print(f"speedup_vs_annealing_cold: {annealing_s / cold_s:.1f} (ratio of {annealing_ms:.2f} to {cold_ms:.3f} ms "
          f"per sample, search cache cleared before each, target >= {TARGET_SPEEDUP:.0f})")  # fmt: skip
    rate = sampler_hits / samples
    print(f"sampler_hit_rate: {rate:.3f} (ratio {sampler_hits}/{samples}, target >= {TARGET_HIT_RATE})")
    print(f"cold_same_point: {same / samples:.3f} (ratio {same}/{samples} cold samples equal to cached ones, target 1)")
    print(f"annealing_hit_rate: {annealing_hits / samples:.3f} (ratio {annealing_hits}/{samples}, baseline)")
    print(f"sampler_ms_per_sample: {sampler_ms:.3f} (ratio {sampler_s / annealing_s:.4f} of annealing, "
          f"target <= {1 / TARGET_SPEEDUP:.2f})")  # fmt: skip
    print(f"annealing_proposals_per_sample: {proposals / samples:.0f} (ratio {proposals / samples / PROPOSALS:.3f} of "
          f"the {PROPOSALS} cap, baseline)")  # fmt: skip
    print(f"lattice_setup_ms_per_scene: {1000 * setup:.1f} (ratio {setup / (sampler_s / samples):.0f} samples' worth, "
          f"once per scene and process)")  # fmt: skip
    print(f"machine: {os.cpu_count()} cores, load average at start {load:.2f}")


if __name__ == "__main__":
    main()
