"""Oriented boxes and the anchor-centred frame in which every spatial predicate is decided.

Precision follows the reference on purpose: centres, fronts, corners and extents are float32 while widths, depths and
heights stay Python floats. Mixed expressions then round the way the reference's did (NumPy ≥ 2 promotion: a Python
float meeting a float32 array becomes float32), which is what makes verdicts on boundary points agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the sandbox's template unpickles boxes without the data layer (or pydantic) loaded
    from edsb.data.models import SceneObjectRecord


def _frozen_array(values: object, shape: tuple[int, ...]) -> np.ndarray:
    array = np.array(values, dtype=np.float32).reshape(shape)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Box:
    """One scene object. Identity-compared and hashable, so boxes can key dicts and sets."""

    id: int
    label: str
    idx: int
    name: str
    center: np.ndarray  # float32 (3,)
    front: np.ndarray  # float32 (3,), unit, z = 0; stored even when `has_orientation` is false
    width: float  # across the front
    depth: float  # along the front
    height: float
    corners: np.ndarray  # float32 (8, 3): the footprint cyclically at the bottom, then the same four on top
    aa_extents: np.ndarray  # float32 (3,)
    has_orientation: bool
    sit_offset_horizontal: float
    sit_offset_vertical: float
    min_z: np.float32
    max_z: np.float32
    rotation: np.ndarray  # float32 (2, 2): world xy offsets → canonical frame (front along +y)

    @classmethod
    def from_record(cls, record: SceneObjectRecord) -> Box:
        front = _frozen_array(record.orientation, (3,))
        corners = _frozen_array(record.bbox, (8, 3))
        return cls(
            id=record.id,
            label=record.label,
            idx=record.idx,
            name=record.name,
            center=_frozen_array(record.center, (3,)),
            front=front,
            width=float(record.width),
            depth=float(record.depth),
            height=float(record.height),
            corners=corners,
            aa_extents=_frozen_array(record.aa_extents, (3,)),
            has_orientation=record.has_orientation,
            sit_offset_horizontal=float(record.sit_offset_horizontal),
            sit_offset_vertical=float(record.sit_offset_vertical),
            min_z=corners[:, 2].min(),
            max_z=corners[:, 2].max(),
            rotation=canonical_rotation(front),
        )

    @property
    def half_width(self) -> float:
        return self.width / 2

    @property
    def half_depth(self) -> float:
        return self.depth / 2

    @property
    def footprint(self) -> np.ndarray:
        """float32 (4, 2): the bottom corners' xy, in cyclic order."""
        return self.corners[:4, :2]

    def __repr__(self) -> str:
        return f"Box({self.name})"


def canonical_rotation(front: np.ndarray) -> np.ndarray:
    """The float32 rotation by π/2 − atan2(f_y, f_x): it turns the front vector onto +y."""
    angle = np.pi / 2 - np.arctan2(front[1], front[0])  # stays float32: the Python float adapts to it
    cos, sin = np.cos(angle), np.sin(angle)
    rotation = np.array([[cos, -sin], [sin, cos]], dtype=np.float32)
    rotation.setflags(write=False)
    return rotation


def to_canonical(box: Box, points: np.ndarray) -> np.ndarray:
    """Points (N, 2) in the box's frame: centre at the origin, front along +y, right along +x (as the box sees it).

    The two products are summed elementwise rather than by matmul so that each coordinate is rounded exactly like
    the reference's per-point `R @ v` (checked bitwise); the dtype is float32 for float32 input.
    """
    offsets = np.asarray(points) - box.center[:2]
    dx, dy = offsets[..., 0], offsets[..., 1]
    (r00, r01), (r10, r11) = box.rotation
    return np.stack([r00 * dx + r01 * dy, r10 * dx + r11 * dy], axis=-1)
