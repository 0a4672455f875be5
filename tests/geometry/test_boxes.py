from __future__ import annotations

import numpy as np
import pytest

from edsb.geometry.boxes import to_canonical
from edsb.geometry.scene import Scene
from tests.support.scenes import make_box


def test_box_keeps_reference_precision() -> None:
    box = make_box("chair_3", (1.0, 2.0), width=0.6, depth=0.5, height=0.9, min_z=0.05)
    assert box.name == "chair_3" and box.label == "chair" and box.idx == 3
    for array, shape in ((box.center, (3,)), (box.front, (3,)), (box.corners, (8, 3)), (box.aa_extents, (3,))):
        assert array.dtype == np.float32 and array.shape == shape
        assert not array.flags.writeable
    assert type(box.width) is float and type(box.depth) is float and type(box.height) is float
    assert box.min_z.dtype == np.float32 and box.max_z.dtype == np.float32
    assert box.min_z == np.float32(0.05) and box.max_z == np.float32(0.95)
    assert box.footprint.shape == (4, 2)


def test_canonical_frame_puts_front_on_plus_y_and_right_on_plus_x() -> None:
    east = make_box("fridge_1", (3.0, 4.0), facing_deg=0.0)  # faces +x: its right hand points to −y
    points = np.array([[4.0, 4.0], [3.0, 3.0], [2.0, 4.0], [3.0, 5.0]], dtype=np.float32)
    np.testing.assert_allclose(to_canonical(east, points), [[0, 1], [1, 0], [0, -1], [-1, 0]], atol=1e-6)


def test_canonical_keeps_dtype_and_matches_a_matrix_product_bitwise() -> None:
    box = make_box("desk_1", (1.5, -2.0), facing_deg=37.0)
    rng = np.random.default_rng(0)
    points = rng.uniform(-5, 5, size=(500, 2)).astype(np.float32)
    canonical = to_canonical(box, points)
    assert canonical.dtype == np.float32
    per_point = np.array([box.rotation @ (p - box.center[:2]) for p in points])
    assert np.array_equal(canonical, per_point)
    assert to_canonical(box, points.astype(np.float64)).dtype == np.float64


def test_boxes_compare_by_identity(real_scene: Scene) -> None:
    first = real_scene.objects[0]
    assert first == first and first != real_scene.objects[1]
    assert {first: 1}[first] == 1
    with pytest.raises(AttributeError):
        first.width = 3.0  # type: ignore[misc]
