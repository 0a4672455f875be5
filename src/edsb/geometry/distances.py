"""Distances between boxes and from points to boxes, vectorised over points of shape (..., 2)
(docs/reference.md#distances).

Point-to-box distances are computed in each anchor's canonical frame and keep the reference's mixed precision: for
float32 points, a value measured along one axis is a float32 (a float32 coordinate minus a Python float), a value
measured to a rectangle corner is a float64 Euclidean norm. `MixedDistances` remembers which is which, because a
float32 value is compared with a float32-rounded threshold (`0.1` becomes 0.100000001…) and a float64 one with the
exact threshold.
The public `*_distance` functions return plain float64 arrays for costs and display.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edsb.geometry.boxes import Box, to_canonical
from edsb.geometry.relations import (
    BEHIND,
    IN_FRONT_OF,
    INTERACTION_OFFSET,
    LEFT_OF,
    RIGHT_OF,
    SAMPLER_DIRECTIONAL_OFFSET,
    TWO_ANCHOR_ALONG_TOLERANCE,
    TWO_ANCHOR_ORTHOGONAL_TOLERANCE,
    TWO_ANCHOR_PREDICATES,
    Direction,
    TwoAnchorKind,
)

ArrayOrFloat = np.ndarray | float


@dataclass(frozen=True)
class MixedDistances:
    """Distances as float64 values plus a mask of those the reference held as float32."""

    values: np.ndarray
    single: np.ndarray

    def at_most(self, threshold: float) -> np.ndarray:
        """bool: `distance <= threshold` with each value compared at its own precision, as the reference compares."""
        as_single = self.values <= float(np.float32(threshold))
        return np.where(self.single, as_single, self.values <= threshold)


def _corner_distance(x: np.ndarray, y: np.ndarray, corner_x: ArrayOrFloat, corner_y: ArrayOrFloat) -> np.ndarray:
    """float64 Euclidean distance, summed as dx² + dy² (bitwise equal to the reference's `np.linalg.norm`)."""
    dx = x.astype(np.float64) - corner_x
    dy = y.astype(np.float64) - corner_y
    return np.sqrt(dx * dx + dy * dy)


def _mixed(corner: np.ndarray, corner_values: np.ndarray, axis_values: np.ndarray) -> MixedDistances:
    """Corner values where `corner`, axis values elsewhere; only float32 axis values count as single precision."""
    single = ~corner if axis_values.dtype == np.float32 else np.zeros_like(corner)
    return MixedDistances(np.where(corner, corner_values, axis_values.astype(np.float64)), single)


def _rectangle_distance(
    x: np.ndarray, y: np.ndarray, x_lo: float, x_hi: float, y_lo: float, y_hi: float
) -> MixedDistances:
    """Distance to [x_lo, x_hi] × [y_lo, y_hi], zero inside.

    The tests run in the reference's priority (x below, x above, then y above before y below), which matters when
    the rectangle is empty: the seat rectangle of some couches is (docs/reference.md#empty-seat-rectangle).
    """
    x_lo, x_hi, y_lo, y_hi = float(x_lo), float(x_hi), float(y_lo), float(y_hi)  # NumPy scalars would widen x, y
    left = x < x_lo
    right = ~left & (x > x_hi)
    above = y > y_hi
    below = ~above & (y < y_lo)
    corner = (left | right) & (above | below)
    corner_values = _corner_distance(x, y, np.where(left, x_lo, x_hi), np.where(above, y_hi, y_lo))
    across = np.where(left, x_lo - x, x - x_hi)
    along = np.where(above, y - y_hi, np.where(below, y_lo - y, np.zeros_like(y)))
    axis_values = np.where(left | right, across, along)
    return _mixed(corner, corner_values, axis_values)


def _beyond_face(
    along: np.ndarray, lateral: np.ndarray, half_along: float, half_lateral: float, offset: float
) -> MixedDistances:
    """Distance to the unbounded strip beyond one face, in face coordinates (`along` points out of the face).

    Short of the face: the distance to the face, or to its nearer end beyond the sides. Past the face: the lateral
    distance to the strip widened by `offset` on both sides. Faces other than the front are reached by negating or
    swapping the canonical coordinates, which is exact in floating point.
    """
    short = along < half_along
    outward = lateral > half_lateral
    inward = ~outward & (lateral < -half_lateral)
    corner = short & (outward | inward)
    corner_values = _corner_distance(along, lateral, half_along, np.where(outward, half_lateral, -half_lateral))
    to_face = half_along - along
    wide = half_lateral + offset
    past_out = lateral > wide
    past_in = ~past_out & (lateral < -half_lateral - offset)
    inner_gap = np.where(past_in, -half_lateral - offset - lateral, np.zeros_like(lateral))
    lateral_gap = np.where(past_out, lateral - half_lateral - offset, inner_gap)
    axis_values = np.where(short, to_face, lateral_gap)
    return _mixed(corner, corner_values, axis_values)


def _face_coordinates(box: Box, canonical: np.ndarray, relation: str) -> tuple[np.ndarray, np.ndarray, float, float]:
    x, y = canonical[..., 0], canonical[..., 1]
    if relation == IN_FRONT_OF:
        return y, x, box.half_depth, box.half_width
    if relation == BEHIND:
        return -y, x, box.half_depth, box.half_width
    if relation == RIGHT_OF:
        return x, y, box.half_width, box.half_depth
    if relation == LEFT_OF:
        return -x, y, box.half_width, box.half_depth
    raise ValueError(f"unknown direction: {relation!r}")


def directional_distances(
    box: Box, points: np.ndarray, relation: Direction | str, offset: float = SAMPLER_DIRECTIONAL_OFFSET
) -> MixedDistances:
    """D_dir with precision kept: how far points are from lying `relation` the box (sides as seen by the box)."""
    along, lateral, half_along, half_lateral = _face_coordinates(box, to_canonical(box, points), relation)
    return _beyond_face(along, lateral, half_along, half_lateral, float(offset))


def directional_distance(
    box: Box, points: np.ndarray, relation: Direction | str, offset: float = SAMPLER_DIRECTIONAL_OFFSET
) -> np.ndarray:
    """D_dir as float64: zero on the strip beyond the face, `offset` wider than the box on each side."""
    return directional_distances(box, points, relation, offset).values


def box_distances(box: Box, points: np.ndarray, offset: float = 0.0) -> MixedDistances:
    """D_box with precision kept. The reference only ever passes offset 0, where this matches it bit for bit."""
    canonical = to_canonical(box, points)
    half_w, half_d, offset = box.half_width, box.half_depth, float(offset)
    return _rectangle_distance(
        canonical[..., 0], canonical[..., 1], -half_w - offset, half_w + offset, -half_d - offset, half_d + offset
    )


def box_distance(box: Box, points: np.ndarray, offset: float = 0.0) -> np.ndarray:
    """D_box as float64: distance from points to the footprint grown by `offset`, zero inside."""
    return box_distances(box, points, offset).values


def interaction_distance(box: Box, points: np.ndarray, offset: float = INTERACTION_OFFSET) -> np.ndarray:
    """D_int (sit on / lie on): distance to the seat rectangle, `offset` in from the sides and the front edge.

    The rectangle starts at depth · sit_offset_horizontal; for some couches that lies beyond the front limit and the
    rectangle is empty, so no point scores zero (docs/reference.md#empty-seat-rectangle).
    """
    canonical = to_canonical(box, points)
    half_w, half_d, offset = box.half_width, box.half_depth, float(offset)
    seat_back = box.depth * box.sit_offset_horizontal
    return _rectangle_distance(
        canonical[..., 0], canonical[..., 1], -half_w + offset, half_w - offset, seat_back, half_d - offset
    ).values


def two_anchor_distance(
    center_1: np.ndarray,
    center_2: np.ndarray,
    points: np.ndarray,
    kind: TwoAnchorKind | str,
    *,
    orthogonal_tolerance: float | None = None,
    along_tolerance: float = TWO_ANCHOR_ALONG_TOLERANCE,
) -> np.ndarray:
    """`between` / `aligned with` two centres: overshoot past the segment's ends (scaled by its length) plus the
    distance to the line beyond `orthogonal_tolerance`. `aligned with` lets the ends stretch by `along_tolerance`
    (a fraction of the separation); `between` never does. Only the xy of the centres is used.
    """
    if kind not in TWO_ANCHOR_PREDICATES:
        raise ValueError(f"unknown two-anchor relation: {kind!r}")
    if orthogonal_tolerance is None:
        orthogonal_tolerance = TWO_ANCHOR_ORTHOGONAL_TOLERANCE[kind]
    start = np.asarray(center_1)[:2]
    direction = np.asarray(center_2)[:2] - start
    offsets = np.asarray(points) - start
    length = np.sqrt(direction @ direction)
    t = (offsets @ direction) / (length * length + 1e-12)
    foot = start + t[..., None] * direction
    gap = foot - np.asarray(points)
    off_line = np.sqrt((gap * gap).sum(axis=-1))
    low, high = (0.0, 1.0) if kind == "between" else (-along_tolerance, 1.0 + along_tolerance)
    overshoot = np.where(t > high, length * (t - high), np.where(t < low, length * (low - t), 0.0))
    sideways = np.where(off_line < orthogonal_tolerance, 0.0, off_line - orthogonal_tolerance)
    return (overshoot + sideways).astype(np.float64)


# --- box to box ---------------------------------------------------------------------------------------------------


def _point_segment_distance(points: np.ndarray, seg_start: np.ndarray, seg_end: np.ndarray) -> np.ndarray:
    edge = seg_end - seg_start
    length_sq = (edge * edge).sum(axis=-1)
    rel = points - seg_start
    safe = np.where(length_sq > 0, length_sq, 1.0)
    t = np.clip((rel * edge).sum(axis=-1) / safe, 0.0, 1.0)
    gap = rel - t[..., None] * edge
    return np.sqrt((gap * gap).sum(axis=-1))


def _cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]


def _segment_distance(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Distance between 2-D segments p0p1 and q0q1 (broadcast over leading axes): 0 when they cross."""
    d_p = p1 - p0
    d_q = q1 - q0
    side_q0 = _cross(d_p, q0 - p0)
    side_q1 = _cross(d_p, q1 - p0)
    side_p0 = _cross(d_q, p0 - q0)
    side_p1 = _cross(d_q, p1 - q0)
    crossing = (side_q0 * side_q1 < 0) & (side_p0 * side_p1 < 0)
    ends = np.minimum(
        np.minimum(_point_segment_distance(p0, q0, q1), _point_segment_distance(p1, q0, q1)),
        np.minimum(_point_segment_distance(q0, p0, p1), _point_segment_distance(q1, p0, p1)),
    )
    return np.where(crossing, 0.0, ends)


def _footprint_edges(footprints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return footprints, np.roll(footprints, -1, axis=-2)


def footprint_distance_matrix(targets: Sequence[Box], anchors: Sequence[Box] | None = None) -> np.ndarray:
    """S for every (target, anchor) pair, float64 (N, M); symmetric when both lists are the same.

    Exact segment geometry on the float32 corners; the reference got the same numbers through a float32
    line-to-line routine, so the two agree to about 1e-6 (the graph's 0.3 / 1.0 / 2.0 cuts have far larger margins
    in the benchmark scenes, which the tests check).
    """
    anchors = targets if anchors is None else anchors
    t_start, t_end = _footprint_edges(np.stack([box.footprint for box in targets]).astype(np.float64))
    a_start, a_end = _footprint_edges(np.stack([box.footprint for box in anchors]).astype(np.float64))
    # shapes: targets (N, 1, 4, 1, 2), anchors (1, M, 1, 4, 2) → (N, M, 4, 4)
    per_edge = _segment_distance(
        t_start[:, None, :, None], t_end[:, None, :, None], a_start[None, :, None, :], a_end[None, :, None, :]
    )
    return per_edge.min(axis=(-2, -1))


def footprint_distance(a: Box, b: Box) -> float:
    """S(A, B): the smallest distance between the footprints' outlines, zero only when outlines touch or cross
    (a footprint nested in another gives the gap between the outlines)."""
    return float(footprint_distance_matrix([a], [b])[0, 0])


def obb_distance_matrix(boxes: Sequence[Box]) -> np.ndarray:
    """obb_distance for every ordered pair (row = first argument), float64 holding float32 values; zero diagonal."""
    centers = np.stack([box.center for box in boxes])  # float32 (N, 3)
    gap = centers[:, None, :] - centers[None, :, :]
    center_distance = np.sqrt(gap[..., 0] * gap[..., 0] + gap[..., 1] * gap[..., 1] + gap[..., 2] * gap[..., 2])
    # ray_inside[i, j]: length inside box j of the ray from j's centre towards i's centre
    ray_inside = np.stack([_ray_length_inside(box, centers) for box in boxes], axis=1)
    first = center_distance - ray_inside
    second = first - ray_inside.T
    result = np.where((first < 0) | (second < 0), 0.0, second.astype(np.float64))
    np.fill_diagonal(result, 0.0)
    return result


def _ray_length_inside(box: Box, targets: np.ndarray) -> np.ndarray:
    """float32 (N,): from the box's centre towards each target point, the length of the ray until it leaves the box."""
    canonical = to_canonical(box, targets[:, :2])
    x, y = canonical[:, 0], canonical[:, 1]
    z = targets[:, 2] - box.center[2]
    with np.errstate(divide="ignore", invalid="ignore"):
        scales = [
            np.where(coord != 0, half / np.abs(coord), np.inf).astype(np.float32)
            for half, coord in ((box.width / 2.0, x), (box.depth / 2.0, y), (box.height / 2.0, z))
        ]
        scale = np.minimum(np.minimum(scales[0], scales[1]), scales[2])
        return scale * np.sqrt(x * x + y * y + z * z)


def obb_distance(a: Box, b: Box) -> float:
    """Clustering distance: centre distance minus the part inside B, then minus the part inside A, floored at 0.

    Asymmetric, as in the reference (docs/reference.md#asymmetric-obb-distance): the floor at zero is applied after each
    subtraction.
    """
    return float(obb_distance_matrix([a, b])[0, 1])
