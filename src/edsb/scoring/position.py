"""The PI position check for one condition atom (docs/reference.md#position-check), vectorised over candidate points.

The condition parser combines atoms; this module decides a single `<predicate> <anchor>` for many points at once,
with the reference's precision: points are cast to float32 first, and each distance is compared with its threshold
at the precision the reference computed it in (see `edsb.geometry.distances.MixedDistances`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edsb.geometry.distances import box_distances, directional_distances
from edsb.geometry.relations import DIRECTIONS, POSITION_CHECK_THRESHOLDS, split_anchor
from edsb.geometry.scene import Scene


def as_points(points: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """float32 (N, 2); a single point (2,) becomes (1, 2). Anything else is a ValueError (wrong coordinate count)."""
    xy = np.asarray(points, dtype=np.float32)
    if xy.ndim == 1:
        xy = xy[None, :]
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise ValueError(f"positions must be (x, y) pairs, got shape {np.shape(points)}")
    return xy


def position_atom_mask(scene: Scene, points: np.ndarray | Sequence[Sequence[float]], atom: str) -> np.ndarray:
    """bool (N,): where `atom` holds. The anchor (last word) must be an object of the scene, else KeyError, checked
    before the predicate (the words before it), which must be one the judge scores, else ValueError."""
    predicate, anchor_name = split_anchor(atom)
    anchor = scene.by_name[anchor_name]
    if predicate not in POSITION_CHECK_THRESHOLDS:
        raise ValueError(f"unknown predicate: {predicate!r}")
    xy = as_points(points)
    if predicate in DIRECTIONS:
        distances = directional_distances(anchor, xy, predicate, offset=0.0)
    else:  # adjacent to, close to, inside: all measured to the footprint
        distances = box_distances(anchor, xy, offset=0.0)
    return distances.at_most(POSITION_CHECK_THRESHOLDS[predicate])


def area_box_mask(points: np.ndarray | Sequence[Sequence[float]], box4: Sequence[float]) -> np.ndarray:
    """bool (N,): inside [min_x, min_y, max_x, max_y], edges included, compared in float32 like the reference."""
    bounds = np.asarray(box4, dtype=np.float32)
    if bounds.shape != (4,):
        raise ValueError(f"an area box needs 4 numbers [min_x, min_y, max_x, max_y], got shape {bounds.shape}")
    xy = as_points(points)
    min_x, min_y, max_x, max_y = bounds
    x, y = xy[:, 0], xy[:, 1]
    return (min_x <= x) & (x <= max_x) & (min_y <= y) & (y <= max_y)
