"""Mesh-free collision: a standing point collides with a floor-standing object whose footprint strictly contains it.

This is the judge's test (§7.5) and the sampler's `bbox` mode. The reference sampler's default (`cylinder`) needs the
HSSD meshes; without them this box test is what edsb uses, and results say so.
"""

from __future__ import annotations

import numpy as np

from edsb.geometry.boxes import Box, to_canonical
from edsb.geometry.relations import FLOOR_TOLERANCE
from edsb.geometry.scene import Scene


def stands_on_floor(box: Box) -> bool:
    """|min_z| ≤ 0.1, evaluated in float32 like the reference (the graph's floor test is a strict `<`, §9.19)."""
    return bool(abs(box.min_z - 0.0) <= FLOOR_TOLERANCE)


def inside_footprint(box: Box, points: np.ndarray) -> np.ndarray:
    """bool (...): strictly inside the box's footprint (points on an edge do not collide).

    Phrased as "not outside" like the reference, so a NaN coordinate, never outside, counts as inside.
    """
    canonical = to_canonical(box, points)
    x, y = canonical[..., 0], canonical[..., 1]
    half_w, half_d = box.half_width, box.half_depth
    return ~((x <= -half_w) | (x >= half_w) | (y <= -half_d) | (y >= half_d))


def floor_collisions(scene: Scene, points: np.ndarray) -> np.ndarray:
    """bool (N,): which points (cast to float32, as the judge does) stand inside some floor object's footprint."""
    xy = np.asarray(points, dtype=np.float32)
    hit = np.zeros(xy.shape[:-1], dtype=bool)
    for box in scene.objects:
        if stands_on_floor(box):
            hit |= inside_footprint(box, xy)
    return hit


def first_collision(scene: Scene, points: np.ndarray) -> np.ndarray:
    """int (N,): index in `scene.objects` of the first floor object (scene order) each point collides with, or -1."""
    xy = np.asarray(points, dtype=np.float32)
    found = np.full(xy.shape[:-1], -1, dtype=np.int64)
    for index, box in enumerate(scene.objects):
        if stands_on_floor(box):
            found = np.where((found < 0) & inside_footprint(box, xy), index, found)
    return found
