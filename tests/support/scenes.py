"""Small hand-made boxes and scenes for geometry and scoring tests (no data directory needed)."""

from __future__ import annotations

import math

import numpy as np

from edsb.data.models import GridSettings, SceneObjectRecord
from edsb.geometry.boxes import Box
from edsb.geometry.scene import Scene, build_scene

GRID = GridSettings(
    grid_step=0.3,
    x_margin=0.1,
    y_margin=0.1,
    z_margin=0.1,
    cylinder_radius=0.2,
    cylinder_height=0.6,
    user_modifications={"occupied": [], "unoccupied": []},
)


def make_box(
    name: str = "table_1",
    center: tuple[float, float] = (0.0, 0.0),
    *,
    facing_deg: float = 90.0,
    width: float = 2.0,
    depth: float = 1.0,
    height: float = 1.0,
    min_z: float = 0.0,
    box_id: int = 0,
    has_orientation: bool = True,
    sit_offset_horizontal: float = 0.0,
) -> Box:
    """A box standing at `center`, its front pointing `facing_deg` degrees from +x (90 = +y)."""
    label, idx = name.rsplit("_", 1)
    angle = math.radians(facing_deg)
    front = np.array([math.cos(angle), math.sin(angle)])
    right = np.array([front[1], -front[0]])  # as seen by the box
    cx, cy = center
    half_w, half_d = width / 2, depth / 2
    footprint = [
        np.array([cx, cy]) + sx * half_w * right + sy * half_d * front
        for sx, sy in ((1, 1), (-1, 1), (-1, -1), (1, -1))
    ]
    corners = [[*xy, min_z] for xy in footprint] + [[*xy, min_z + height] for xy in footprint]
    record = SceneObjectRecord(
        id=box_id,
        label=label,
        idx=int(idx),
        aa_extents=[width, depth, height],
        orientation=[float(front[0]), float(front[1]), 0.0],
        has_orientation=has_orientation,
        width=float(width),
        depth=float(depth),
        height=float(height),
        center=[float(cx), float(cy), min_z + height / 2],
        bbox=[[float(v) for v in corner] for corner in corners],
        sit_offset_horizontal=float(sit_offset_horizontal),
        sit_offset_vertical=0.0,
    )
    return Box.from_record(record)


def make_scene(*boxes: Box, size: tuple[float, float] = (10.0, 10.0), name: str = "Test") -> Scene:
    return build_scene(name, list(boxes), np.array([[0.0, 0.0, 0.0], [size[0], size[1], 3.0]]), GRID)
