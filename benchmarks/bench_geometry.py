"""Times the vectorised PI position check against a one-point-at-a-time loop (prints a ratio; not a test).

    EDSB_DATA=/path/to/edsb-data python benchmarks/bench_geometry.py [--points 100000] [--loop-points 2000]

The loop is timed on a subset and scaled up, since it is what a per-point evaluator (the reference's) costs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from edsb.data.benchmark import Benchmark
from edsb.geometry.collision import floor_collisions
from edsb.geometry.scene import load_scene
from edsb.scoring.position import position_atom_mask

ATOMS = {
    "House": ["in front of fridge_1", "adjacent to coffee_maker_1", "behind chair_1"],
    "Office": ["to the left of water_dispenser_1", "to the right of cabinet_2", "in front of couch_3"],
    "Restaurant": ["behind reception_desk_1", "adjacent to table_5", "close to table_1"],
}


def check(scene, points: np.ndarray, atoms: list[str]) -> np.ndarray:
    held = np.zeros(len(points), dtype=bool)
    for atom in atoms:
        held |= position_atom_mask(scene, points, atom)
    return held & ~floor_collisions(scene, points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="benchmark data directory (default: $EDSB_DATA)")
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--loop-points", type=int, default=2_000)
    args = parser.parse_args()

    benchmark = Benchmark.open(args.data)
    rng = np.random.default_rng(0)
    print(f"{'scene':<11} {'vectorised':>12} {'per point':>12} {'ratio':>8}   ({args.points:,} points, 3 atoms)")
    for name, atoms in ATOMS.items():
        scene = load_scene(benchmark, name)
        low, high = scene.bounds[0, :2], scene.bounds[1, :2]
        points = rng.uniform(low, high, size=(args.points, 2))

        start = time.perf_counter()
        together = check(scene, points, atoms)
        vectorised = time.perf_counter() - start

        subset = points[: args.loop_points]
        start = time.perf_counter()
        alone = np.array([check(scene, point[None, :], atoms)[0] for point in subset])
        per_point = (time.perf_counter() - start) * len(points) / len(subset)

        assert (alone == together[: len(subset)]).all(), "vectorised and per-point verdicts differ"
        print(f"{name:<11} {vectorised * 1e3:>10.1f}ms {per_point * 1e3:>10.0f}ms {per_point / vectorised:>7.0f}×")


if __name__ == "__main__":
    main()
