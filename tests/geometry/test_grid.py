from __future__ import annotations

import numpy as np

from edsb.data.benchmark import Benchmark
from edsb.geometry.collision import floor_collisions
from edsb.geometry.grid import build_occupancy_grid, occupancy_grid_of
from edsb.geometry.scene import load_scene
from tests.support.scenes import make_box, make_scene


def test_grid_spans_the_sampler_range_with_the_reference_cell_count(benchmark: Benchmark) -> None:
    office = load_scene(benchmark, "Office")
    grid = occupancy_grid_of(office)
    assert grid.shape == (36, 57)  # ceil((max − min + 2·|margin|) / 0.3) per axis
    assert grid.points.dtype == np.float32
    np.testing.assert_allclose(grid.points[0, 0], office.allowed_xy[0], atol=1e-6)
    assert (grid.points[-1, -1] <= office.allowed_xy[1] + 1e-6).all()
    for ix, iy in office.grid.user_modifications["occupied"]:
        assert grid.occupied[ix, iy]
    for ix, iy in office.grid.user_modifications["unoccupied"]:
        assert not grid.occupied[ix, iy]


def test_free_cells_do_not_collide_unless_freed_by_hand(real_scene) -> None:
    grid = occupancy_grid_of(real_scene)
    free_cells = np.argwhere(~grid.occupied)
    assert len(free_cells) > 100
    colliding = floor_collisions(real_scene, grid.points[~grid.occupied])
    freed_by_hand = {tuple(cell) for cell in real_scene.grid.user_modifications["unoccupied"]}
    assert {tuple(int(i) for i in cell) for cell in free_cells[colliding]} <= freed_by_hand


def test_box_based_occupancy_uses_the_cylinder_radius_and_heights() -> None:
    table = make_box("table_1", (5.0, 5.0), width=1.0, depth=1.0, height=0.75, box_id=0)
    lamp = make_box("lamp_1", (2.0, 2.0), width=1.0, depth=1.0, height=0.2, min_z=2.0, box_id=1)
    grid = build_occupancy_grid(make_scene(table, lamp))  # radius 0.2, heights 0.1 / 0.4 / 0.7
    cells = grid.points.reshape(-1, 2)
    occupied = grid.occupied.reshape(-1)
    near_table = np.abs(cells - [5.0, 5.0]).max(axis=1) < 0.5 + 0.2 - 1e-3
    far_from_table = np.abs(cells - [5.0, 5.0]).max(axis=1) > 0.5 + 0.2 * np.sqrt(2) + 1e-3
    assert occupied[near_table].all() and near_table.any()
    assert not occupied[far_from_table].any()  # the lamp hangs above the cylinder
    assert grid.closest_free_cell(np.array([5.0, 5.0])) not in set(zip(*np.nonzero(grid.occupied), strict=True))
