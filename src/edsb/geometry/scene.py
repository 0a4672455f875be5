"""A scene as the geometry layer sees it: boxes in the reference's order, bounds and grid settings.

Scene order is `id` order stably sorted by label (so `chair_4` may precede `chair_3`); it decides the object list,
the graph text, tie-breaks and the collision scan, so every consumer iterates `Scene.objects` and nothing else. The
one exception is a perturbed benchmark's texts: they list `Scene.listed` (a shuffled order), while tie-breaks and the
collision scan keep scene order, which the renaming leaves alone (it changes instance numbers, never ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from edsb.geometry.boxes import Box

if TYPE_CHECKING:  # the sandbox's template unpickles scenes without the data layer (or pydantic) loaded
    from edsb.data.benchmark import Benchmark
    from edsb.data.models import GridSettings


@dataclass(frozen=True, eq=False)
class Scene:
    name: str
    objects: tuple[Box, ...]
    by_name: dict[str, Box]
    bounds: np.ndarray  # float32 (2, 3): scene min and max corner from scene.json
    grid: GridSettings
    allowed_xy: np.ndarray  # float64 (2, 2): [[min_x, min_y], [max_x, max_y]] the sampler may use
    listing: tuple[Box, ...] = ()  # the order the texts list objects in, when not scene order (perturbed runs)

    @property
    def listed(self) -> tuple[Box, ...]:
        """The objects in the order the object list and the scene-graph text show them."""
        return self.listing or self.objects

    def box(self, name: str) -> Box:
        """The object called `name`; KeyError (the reference's error for unknown anchors) otherwise."""
        return self.by_name[name]

    def within_allowed(self, points: np.ndarray) -> np.ndarray:
        """bool (N,): inside the sampler's range, edges included (negative margins reach past the scene box)."""
        xy = np.asarray(points)[..., :2]
        low, high = self.allowed_xy
        return ~((xy < low) | (xy > high)).any(axis=-1)


def scene_order(boxes: list[Box] | tuple[Box, ...]) -> tuple[Box, ...]:
    """Id order, then a stable sort by label."""
    return tuple(sorted(sorted(boxes, key=lambda box: box.id), key=lambda box: box.label))


def build_scene(
    name: str, boxes: list[Box], bounds: ArrayLike, grid: GridSettings, listing: Sequence[int] | None = None
) -> Scene:
    """`listing`: object ids in the order the texts should show them (default: scene order)."""
    ordered = scene_order(boxes)
    corners = np.array(bounds, dtype=np.float32).reshape(2, 3)
    corners.setflags(write=False)
    margins = np.array([grid.x_margin, grid.y_margin])
    allowed = np.stack([corners[0, :2] + margins, corners[1, :2] - margins])  # float64, as the reference's check
    allowed.setflags(write=False)
    return Scene(
        name=name,
        objects=ordered,
        by_name={box.name: box for box in ordered},
        bounds=corners,
        grid=grid,
        allowed_xy=allowed,
        listing=() if listing is None else tuple({box.id: box for box in boxes}[i] for i in listing),
    )


def load_scene(benchmark: Benchmark, name: str) -> Scene:
    """The named scene of a data directory (renamed if the benchmark is perturbed). Cached per directory, perturbation
    and name: the files are pinned and read-only."""
    return _load_scene(benchmark.resolved_root, benchmark.perturb, name)


@lru_cache(maxsize=16)
def _load_scene(root: Path, perturb: int, name: str) -> Scene:
    from edsb.data.benchmark import Benchmark

    benchmark = Benchmark(root, perturb)
    boxes = [Box.from_record(record) for record in benchmark.object_records(name)]
    bounds, grid = benchmark.scene_bounds(name).bbox, benchmark.grid_settings(name)
    return build_scene(name, boxes, bounds, grid, benchmark.listing_order(name))
