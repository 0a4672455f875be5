"""The PI position check (docs/reference.md#position-check) and collision check (docs/reference.md#collision-check)
against the reference's verdicts on a lattice (docs/reference.md#worked-verdicts)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.collision import floor_collisions
from edsb.geometry.scene import Scene, load_scene
from edsb.scoring.conditions import evaluate_condition, iter_atoms, parse_condition
from edsb.scoring.position import area_box_mask, position_atom_mask
from tests.support.scenes import make_box, make_scene

# id: (lattice nx, ny, points where the condition holds, colliding points, passing points, sha256[:16] of the
# x-major pass bit string) — docs/reference.md#worked-verdicts, produced by the reference evaluator.
LATTICE_VERDICTS = {
    60: (49, 108, 787, 1366, 685, "5d7745b288cb33b4"),
    61: (49, 108, 207, 1366, 112, "a8478c77526b5a6d"),
    62: (49, 108, 218, 1366, 164, "921df074ec920a0d"),
    63: (96, 168, 1070, 4025, 896, "a06b23301df83775"),
    64: (96, 168, 726, 4025, 610, "49f1f4d6bf7811ee"),
    65: (96, 168, 414, 4025, 279, "56b036d2837b06e0"),
    66: (72, 102, 827, 2101, 570, "95f0a668279ef007"),
    67: (72, 102, 2798, 2101, 1797, "f0d3083c6c186b5e"),
    68: (72, 102, 356, 2101, 288, "5ce5412ab472cec2"),
    69: (49, 108, 650, 1366, 457, "1de179054468d4f0"),
}
# The only multi-atom PI condition, atom by atom (counted with the reference evaluator on the same lattice).
CASE_63_ATOMS = {"in front of couch_1": 574, "in front of couch_2": 1104, "in front of couch_3": 5813}


def lattice(scene: Scene) -> tuple[int, int, np.ndarray]:
    """p = (i/10, j/10) as Python floats, x-major, over the scene box."""
    nx = math.floor(10 * float(scene.bounds[1, 0])) + 1
    ny = math.floor(10 * float(scene.bounds[1, 1])) + 1
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    return nx, ny, np.stack([i.ravel() / 10, j.ravel() / 10], axis=1)


@pytest.mark.parametrize("case_id", sorted(LATTICE_VERDICTS))
def test_lattice_verdicts_match_the_reference(benchmark: Benchmark, case_id: int) -> None:
    case = benchmark.case(case_id)
    scene = load_scene(benchmark, case.scene_name)
    condition = case.expected_plans[0].sampled_position
    assert isinstance(condition, str)
    nx, ny, points = lattice(scene)
    atoms = {atom: position_atom_mask(scene, points, atom) for atom in iter_atoms(parse_condition(condition))}
    if len(atoms) == 1:
        ((atom, mask),) = atoms.items()
        assert mask.sum() == LATTICE_VERDICTS[case_id][2], atom
    else:
        assert {atom: int(mask.sum()) for atom, mask in atoms.items()} == CASE_63_ATOMS
    holds = evaluate_condition(parse_condition(condition), atoms.__getitem__)
    colliding = floor_collisions(scene, points)
    passed = holds & ~colliding
    bits = "".join("1" if v else "0" for v in passed)
    observed = (nx, ny, int(holds.sum()), int(colliding.sum()), int(passed.sum()), _sha16(bits))
    assert observed == LATTICE_VERDICTS[case_id]


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_vectorised_equals_one_point_at_a_time(benchmark: Benchmark) -> None:
    scene = load_scene(benchmark, "Office")
    rng = np.random.default_rng(3)
    points = rng.uniform([0, 0], [9.5, 16.7], size=(300, 2))
    for atom in ("to the left of water_dispenser_1", "close to couch_2", "behind couch_3", "inside table_1"):
        together = position_atom_mask(scene, points, atom)
        alone = [bool(position_atom_mask(scene, p, atom)[0]) for p in points]
        assert together.tolist() == alone


# A box 0.2 deep at the origin, facing +y: its front face is at y = 0.1 (float32 0.1 exactly in canonical terms).
THIN = make_box("shelf_1", (0.0, 0.0), width=1.0, depth=0.2, box_id=0)
SCENE = make_scene(THIN, make_box("bed_1", (5.0, 5.0), box_id=1))


def test_float32_points_meet_float32_rounded_thresholds() -> None:
    # y = float32(0.2): D_box = 0.2f − 0.1f = 0.1f, which the reference accepts against `<= 0.1` (float32 compare)
    assert position_atom_mask(SCENE, np.array([[0.0, 0.2]]), "inside shelf_1").tolist() == [True]
    assert position_atom_mask(SCENE, np.array([[0.0, 0.2001]]), "inside shelf_1").tolist() == [False]


def test_each_predicate_uses_its_distance_and_threshold() -> None:
    # shelf_1: W = 0.5, H = 0.1; thresholds 0.7 (adjacent), 1.4 (close), 0.1 (inside and the directions)
    p = np.array([[0.0, 0.6], [0.0, 1.7], [0.0, -0.15], [1.1, 0.0], [-0.65, 0.0], [0.0, 0.0]])
    masks = {
        atom: position_atom_mask(SCENE, p, atom).tolist()
        for atom in (
            "adjacent to shelf_1",
            "close to shelf_1",
            "inside shelf_1",
            "in front of shelf_1",
            "behind shelf_1",
            "to the right of shelf_1",
            "to the left of shelf_1",
        )
    }
    assert masks["adjacent to shelf_1"] == [True, False, True, True, True, True]
    assert masks["close to shelf_1"] == [True, False, True, True, True, True]
    assert masks["inside shelf_1"] == [False, False, True, False, False, True]
    # the centre is 0.1 short of the front and back faces: within the directional threshold
    assert masks["in front of shelf_1"] == [True, True, False, False, False, True]
    assert masks["behind shelf_1"] == [False, False, True, False, False, True]
    assert masks["to the right of shelf_1"] == [False, False, False, True, False, False]
    assert masks["to the left of shelf_1"] == [False, False, False, False, True, False]


def test_unknown_anchor_is_a_key_error_checked_before_the_predicate() -> None:
    with pytest.raises(KeyError):
        position_atom_mask(SCENE, np.zeros((1, 2)), "close to shelf_9")
    with pytest.raises(KeyError):
        position_atom_mask(SCENE, np.zeros((1, 2)), "hover over shelf_9")
    with pytest.raises(ValueError, match="unknown predicate"):
        position_atom_mask(SCENE, np.zeros((1, 2)), "sit on shelf_1")
    with pytest.raises(ValueError):
        position_atom_mask(SCENE, np.zeros((2, 3)), "close to shelf_1")


def test_area_box_includes_its_edges_in_float32() -> None:
    points = np.array([[1.0, 1.0], [0.0, 0.5], [2.0, 2.0], [2.0000001, 1.0], [2.01, 1.0], [-0.1, 1.0]])
    assert area_box_mask(points, [0.0, 0.0, 2.0, 2.0]).tolist() == [True, True, True, True, False, False]
    with pytest.raises(ValueError):
        area_box_mask(points, [0.0, 0.0, 2.0])
