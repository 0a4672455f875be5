from __future__ import annotations

import math

import numpy as np
import pytest

from edsb.geometry.distances import (
    MixedDistances,
    box_distance,
    box_distances,
    directional_distance,
    directional_distances,
    footprint_distance,
    footprint_distance_matrix,
    interaction_distance,
    obb_distance,
    two_anchor_distance,
)
from edsb.geometry.scene import load_scene
from tests.support.scenes import make_box

# A 2 m wide, 1 m deep box at the origin facing +y: W = 1, H = 0.5 and canonical = world coordinates.
TABLE = make_box("table_1", (0.0, 0.0), width=2.0, depth=1.0)


def pts(*xy: tuple[float, float]) -> np.ndarray:
    return np.array(xy, dtype=np.float32)


def test_box_distance_inside_edges_and_corners() -> None:
    d = box_distance(TABLE, pts((0, 0), (0.5, 0.4), (0, 1.5), (3, 0), (-1.5, 0), (0, -0.75), (4, 4.5), (-2, -1.5)))
    np.testing.assert_allclose(d, [0, 0, 1.0, 2.0, 0.5, 0.25, 5.0, math.sqrt(2)], rtol=1e-6)
    assert d.dtype == np.float64


def test_box_distance_offset_grows_the_footprint() -> None:
    d = box_distance(TABLE, pts((0, 1.5), (2.5, 0), (1.3, 0.8)), offset=0.3)
    np.testing.assert_allclose(d, [0.7, 1.2, 0.0], atol=1e-6)


def test_box_distance_is_measured_in_the_rotated_frame() -> None:
    tilted = make_box("table_2", (5.0, 5.0), facing_deg=45.0, width=2.0, depth=2.0)
    outside_corner = np.array([5.0, 5.0]) + math.sqrt(2) * 1.0 + 1.0 / math.sqrt(2) * np.array([1, 1])
    # along the front axis the half-depth is 1, so a point 2 m out along the front is 1 m away
    front_point = np.array([5.0, 5.0]) + 2.0 * np.array([1, 1]) / math.sqrt(2)
    d = box_distance(tilted, np.array([front_point, outside_corner], dtype=np.float32))
    assert d[0] == pytest.approx(1.0, abs=1e-6)
    assert d[1] > 0


@pytest.mark.parametrize(
    ("relation", "inside_region", "outside"),
    [
        ("in front of", (0.0, 2.0), (0.0, -2.0)),
        ("behind", (0.5, -3.0), (0.0, 2.0)),
        ("to the right of", (4.0, 0.3), (-4.0, 0.0)),
        ("to the left of", (-4.0, -0.3), (4.0, 0.0)),
    ],
)
def test_directional_zero_region_is_the_strip_beyond_the_face(relation, inside_region, outside) -> None:
    d = directional_distance(TABLE, pts(inside_region, outside), relation, offset=0.0)
    assert d[0] == 0.0 and d[1] > 0


def test_in_front_of_values_for_each_branch() -> None:
    # short of the face within the sides: distance to the face; beyond the sides: to the face's end (a corner);
    # past the face: lateral distance to the strip widened by the offset
    p = pts((0.2, 0.0), (-0.3, -2.0), (3.0, 0.2), (-4.0, -0.5), (3.0, 2.0), (-1.05, 5.0), (1.1, 1.0))
    d = directional_distance(TABLE, p, "in front of", offset=0.1)
    expected = [0.5, 2.5, math.hypot(2.0, 0.3), math.hypot(3.0, 1.0), 1.9, 0.0, 0.0]
    np.testing.assert_allclose(d, expected, rtol=1e-6, atol=1e-6)
    d0 = directional_distance(TABLE, p, "in front of", offset=0.0)
    assert d0[5] == pytest.approx(0.05, abs=1e-6) and d0[6] == pytest.approx(0.1, abs=1e-6)


def test_left_and_right_are_as_seen_by_the_object() -> None:
    east = make_box("sofa_1", (0.0, 0.0), facing_deg=0.0, width=2.0, depth=1.0)  # faces +x: its left is +y
    north, south = (0.0, 3.0), (0.0, -3.0)
    assert directional_distance(east, pts(north), "to the left of", 0.0)[0] == 0.0
    assert directional_distance(east, pts(south), "to the right of", 0.0)[0] == 0.0
    assert directional_distance(east, pts(north), "to the right of", 0.0)[0] > 3.0
    assert directional_distance(east, pts((3.0, 0.0)), "in front of", 0.0)[0] == 0.0
    assert directional_distance(east, pts((-3.0, 0.0)), "behind", 0.0)[0] == 0.0


def test_directional_rejects_unknown_relation() -> None:
    with pytest.raises(ValueError, match="unknown direction"):
        directional_distance(TABLE, pts((0, 0)), "above")


def test_precision_flags_follow_the_branch() -> None:
    measured = directional_distances(TABLE, pts((0.0, 0.0), (3.0, 0.0), (0.0, 3.0)), "in front of", 0.0)
    assert measured.single.tolist() == [True, False, True]  # face distance, corner distance, zero region
    assert box_distances(TABLE, pts((3.0, 3.0)), 0.0).single.tolist() == [False]


def test_thresholds_are_compared_at_each_values_precision() -> None:
    f32_tenth = float(np.float32(0.1))  # 0.10000000149…
    measured = MixedDistances(np.array([f32_tenth, f32_tenth, 0.1]), np.array([True, False, False]))
    # a float32 value meets the float32-rounded threshold; a float64 value the exact one
    assert measured.at_most(0.1).tolist() == [True, False, True]


def test_interaction_rectangle_and_its_empty_case() -> None:
    seat = make_box("chair_1", (0.0, 0.0), width=1.0, depth=1.0, sit_offset_horizontal=0.1)
    # seat rectangle: x in [-0.3, 0.3], y in [0.1, 0.3]
    d = interaction_distance(seat, pts((0.0, 0.2), (0.0, 0.0), (0.5, 0.2), (0.0, 1.0), (0.7, 0.7)))
    np.testing.assert_allclose(d, [0.0, 0.1, 0.2, 0.7, math.hypot(0.4, 0.4)], atol=1e-6)

    couch = make_box("couch_1", (0.0, 0.0), width=2.0, depth=1.0, sit_offset_horizontal=0.4)
    # depth · offset = 0.4 lies beyond H − 0.2 = 0.3: no point scores zero; just past y = 0.3 scores almost zero
    ys = np.linspace(-1.0, 1.0, 2001)
    d = interaction_distance(couch, np.stack([np.zeros_like(ys), ys], axis=1).astype(np.float32))
    assert (d > 0).all()
    assert d[np.argmin(d)] < 2e-3 and 0.3 < ys[np.argmin(d)] < 0.302


def test_two_anchor_between_and_aligned() -> None:
    c1, c2 = np.array([0.0, 0.0, 0.5]), np.array([4.0, 0.0, 0.5])
    p = np.array([[2.0, 0.0], [2.0, 0.4], [2.0, 1.5], [5.0, 0.0], [-2.0, 0.0], [7.0, 0.0], [9.0, 0.0]])
    between = two_anchor_distance(c1, c2, p, "between")
    np.testing.assert_allclose(between, [0, 0, 1.0, 1.0, 2.0, 3.0, 5.0], atol=1e-9)  # metres past the ends
    aligned = two_anchor_distance(c1, c2, p, "aligned with")
    np.testing.assert_allclose(aligned, [0, 0.1, 1.2, 0, 0, 0, 1.0], atol=1e-9)  # ends stretched by 4 m
    with pytest.raises(ValueError):
        two_anchor_distance(c1, c2, p, "near")


def test_footprint_distance_between_outlines() -> None:
    a = make_box("box_1", (0.0, 0.0), width=2.0, depth=2.0)
    apart = make_box("box_2", (4.0, 0.5), width=2.0, depth=2.0)
    diagonal = make_box("box_3", (4.0, 4.0), width=2.0, depth=2.0, facing_deg=45.0)
    crossing = make_box("box_4", (1.5, 0.0), width=2.0, depth=2.0)
    nested = make_box("box_5", (0.0, 0.0), width=1.0, depth=1.0)
    assert footprint_distance(a, apart) == pytest.approx(2.0, abs=1e-6)
    # the diamond's nearest edge lies on x + y = 8 − √2; a's nearest point is its corner (1, 1)
    assert footprint_distance(a, diagonal) == pytest.approx(3 * math.sqrt(2) - 1, abs=1e-6)
    assert footprint_distance(a, crossing) == 0.0
    assert footprint_distance(a, nested) == pytest.approx(0.5, abs=1e-6)
    matrix = footprint_distance_matrix([a, apart, diagonal, nested])
    np.testing.assert_allclose(matrix, matrix.T, atol=1e-12)
    assert footprint_distance(apart, a) == footprint_distance(a, apart)


def test_obb_distance_subtracts_the_part_inside_each_box() -> None:
    a = make_box("box_1", (0.0, 0.0), width=1.0, depth=1.0, height=1.0)
    b = make_box("box_2", (3.0, 0.0), width=1.0, depth=2.0, height=1.0)
    assert obb_distance(a, b) == pytest.approx(2.0, abs=1e-6)
    diagonal = make_box("box_3", (3.0, 3.0), width=1.0, depth=1.0, height=1.0)
    assert obb_distance(a, diagonal) == pytest.approx(math.hypot(3, 3) - math.sqrt(2), abs=1e-5)
    touching = make_box("box_4", (0.5, 0.0), width=1.0, depth=1.0, height=1.0)
    assert obb_distance(a, touching) == 0.0


@pytest.mark.parametrize(("scene_name", "couch"), [("House", "couch_1"), ("Office", "couch_2"), ("Office", "couch_3")])
def test_benchmark_couches_with_an_empty_seat_rectangle(benchmark, scene_name: str, couch: str) -> None:
    box = load_scene(benchmark, scene_name).box(couch)
    assert box.depth * box.sit_offset_horizontal > box.half_depth - 0.2  # docs/reference.md#empty-seat-rectangle
    side = np.linspace(-1.5, 1.5, 301)
    local = np.stack(np.meshgrid(side * box.half_width, side * box.half_depth), axis=-1).reshape(-1, 2)
    world = box.center[:2] + local @ np.linalg.inv(box.rotation).T
    assert (interaction_distance(box, world.astype(np.float32)) > 0).all()


def test_nan_points_fall_in_every_zero_branch() -> None:
    # the reference's tests are all "beyond" comparisons, which NaN fails: it lands on the zero distance
    nan_points = pts((np.nan, 0.0), (0.0, np.nan))
    assert box_distance(TABLE, nan_points).tolist() == [0.0, 0.0]
    assert directional_distance(TABLE, nan_points, "behind", 0.0).tolist() == [0.0, 0.0]


def test_float64_points_are_never_flagged_single() -> None:
    assert not box_distances(TABLE, np.array([[0.0, 0.7]]), 0.0).single.any()
    assert box_distances(TABLE, pts((0.0, 0.7)), 0.0).single.all()
