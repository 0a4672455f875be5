from __future__ import annotations

import numpy as np

from edsb.geometry.collision import first_collision, floor_collisions, inside_footprint, stands_on_floor
from tests.support.scenes import make_box, make_scene


def test_only_strict_insides_of_floor_objects_collide() -> None:
    bed = make_box("bed_1", (2.0, 2.0), facing_deg=30.0, width=2.0, depth=1.0, box_id=0)
    lamp = make_box("lamp_1", (6.0, 6.0), width=1.0, depth=1.0, min_z=1.5, box_id=1)
    scene = make_scene(bed, lamp)
    edge_point = np.array([2.0, 2.0]) + 0.5 * np.array([np.cos(np.radians(30)), np.sin(np.radians(30))])
    points = np.array([[2.0, 2.0], [6.0, 6.0], [9.0, 9.0], edge_point + 0.01 * np.array([1, 0])])
    assert floor_collisions(scene, points).tolist() == [True, False, False, False]
    assert first_collision(scene, points).tolist() == [0, -1, -1, -1]


def test_collision_floor_test_includes_the_tolerance() -> None:
    raised = make_box("shelf_1", (0.0, 0.0), min_z=0.1)  # float32 0.1: floor for collisions (≤), not the graph
    assert stands_on_floor(raised)
    assert not stands_on_floor(make_box("shelf_2", min_z=0.11))
    assert floor_collisions(make_scene(raised), np.array([[0.0, 0.0]])).tolist() == [True]


def test_first_collision_follows_scene_order() -> None:
    sofa = make_box("sofa_1", (1.0, 1.0), width=2.0, depth=2.0, box_id=0)
    bed = make_box("bed_1", (1.0, 1.0), width=1.0, depth=1.0, box_id=1)
    scene = make_scene(sofa, bed)  # label order puts bed_1 first
    assert first_collision(scene, np.array([[1.0, 1.0], [0.2, 0.2]])).tolist() == [0, 1]


def test_nan_is_never_outside_so_it_collides() -> None:
    scene = make_scene(make_box("lamp_1", min_z=1.0, box_id=0), make_box("bed_1", (3.0, 3.0), box_id=1))
    points = np.array([[np.nan, 1.0], [1.0, np.nan], [np.nan, np.nan]])
    assert floor_collisions(scene, points).tolist() == [True, True, True]
    assert first_collision(scene, points).tolist() == [0, 0, 0]  # bed_1, first in scene order and on the floor


def test_the_broadcast_test_is_the_per_box_test_on_real_scenes(real_scene) -> None:
    """Bitwise: random points, points on every footprint edge and their float32 neighbours, non-finite ones."""
    rng = np.random.default_rng(11)
    parts = [rng.uniform(real_scene.bounds[0, :2] - 1, real_scene.bounds[1, :2] + 1, size=(20_000, 2))]
    for box in real_scene.objects:
        corners = box.footprint.astype(np.float64)
        for start, end in zip(corners, np.roll(corners, -1, axis=0), strict=True):
            edge = (start + (end - start) * rng.uniform(0, 1, size=(50, 1))).astype(np.float32)
            parts += [edge, np.nextafter(edge, np.float32(np.inf)), np.nextafter(edge, np.float32(-np.inf))]
    parts.append(np.array([[np.nan, 1.0], [1.0, np.inf], [-np.inf, np.nan]]))
    points = np.concatenate([part.astype(np.float32) for part in parts])

    with np.errstate(invalid="ignore"):
        per_box = np.array([inside_footprint(box, points) for box in real_scene.objects if stands_on_floor(box)])
        floor_index = [index for index, box in enumerate(real_scene.objects) if stands_on_floor(box)]
        expected_first = np.where(per_box.any(axis=0), np.array(floor_index)[per_box.argmax(axis=0)], -1)

        assert np.array_equal(floor_collisions(real_scene, points), per_box.any(axis=0))
        assert np.array_equal(first_collision(real_scene, points), expected_first)
        assert floor_collisions(real_scene, points.reshape(-1, 1, 2)).shape == (len(points), 1)


def test_a_scene_without_floor_objects_has_no_collisions() -> None:
    scene = make_scene(make_box("lamp_1", min_z=1.0, box_id=0))
    points = np.array([[0.0, 0.0], [np.nan, np.nan]])
    assert floor_collisions(scene, points).tolist() == [False, False]
    assert first_collision(scene, points).tolist() == [-1, -1]
