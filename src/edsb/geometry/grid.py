"""A coarse occupancy grid over the walkable area, used by the position sampler to pick a random free start.

The reference builds the same grid (step, margins and `user_modifications` from `grid_map.json`) but decides
occupancy by casting rays from a vertical cylinder against the HSSD object meshes. edsb has no meshes, so occupancy
is decided from the annotated boxes instead: a cell is occupied when the cylinder's footprint disc overlaps the
footprint of an object that spans one of the cylinder's three sample heights (bottom, middle, top — the heights the
reference casts its rays at). The hand-made `user_modifications` are then applied on top, as in the reference.
Results therefore differ slightly from the reference's grid; only random starts depend on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from edsb.geometry.distances import box_distance
from edsb.geometry.scene import Scene


@dataclass(frozen=True, eq=False)
class OccupancyGrid:
    points: np.ndarray  # float32 (nx, ny, 2): cell centres, x-major
    occupied: np.ndarray  # bool (nx, ny)
    step: float

    @property
    def shape(self) -> tuple[int, int]:
        return self.occupied.shape  # type: ignore[return-value]

    def free_points(self) -> np.ndarray:
        """float32 (M, 2): centres of free cells, x-major (the order a random choice is drawn from)."""
        return self.points[~self.occupied]

    def closest_free_cell(self, point: np.ndarray) -> tuple[int, int]:
        """Index of the free cell nearest to `point` (first in x-major order on ties)."""
        distances = np.linalg.norm(self.points - np.asarray(point, dtype=np.float32)[:2], axis=-1)
        distances[self.occupied] = np.inf
        ix, iy = np.unravel_index(int(np.argmin(distances)), self.occupied.shape)
        return int(ix), int(iy)


def _axis(start: float, stop: float, step: float) -> np.ndarray:
    """`arange(start, stop, step)` as the reference's float32 tensor: count from float64, values rounded to float32."""
    count = max(0, math.ceil((stop - start) / step))
    return (start + step * np.arange(count)).astype(np.float32)


def build_occupancy_grid(scene: Scene) -> OccupancyGrid:
    grid = scene.grid
    low, high = scene.bounds[0], scene.bounds[1]
    xs = _axis(float(low[0] + grid.x_margin), float(high[0] - grid.x_margin), grid.grid_step)
    ys = _axis(float(low[1] + grid.y_margin), float(high[1] - grid.y_margin), grid.grid_step)
    points = np.stack(np.meshgrid(xs, ys, indexing="ij"), axis=-1)

    base = float(low[2]) + grid.z_margin
    sample_heights = (base, base + grid.cylinder_height / 2, base + grid.cylinder_height)
    occupied = np.zeros(points.shape[:2], dtype=bool)
    for box in scene.objects:
        if any(box.min_z <= height <= box.max_z for height in sample_heights):
            occupied |= box_distance(box, points) <= grid.cylinder_radius

    for ix, iy in grid.user_modifications.get("occupied", []):
        occupied[ix, iy] = True
    for ix, iy in grid.user_modifications.get("unoccupied", []):
        occupied[ix, iy] = False
    points.setflags(write=False)
    occupied.setflags(write=False)
    return OccupancyGrid(points=points, occupied=occupied, step=float(grid.grid_step))


@lru_cache(maxsize=16)
def occupancy_grid_of(scene: Scene) -> OccupancyGrid:
    return build_occupancy_grid(scene)
