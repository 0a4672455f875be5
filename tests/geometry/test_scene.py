from __future__ import annotations

import numpy as np
import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import Scene, load_scene, scene_order
from tests.support.scenes import make_box, make_scene


def test_scene_order_is_label_then_id(benchmark: Benchmark) -> None:
    house = load_scene(benchmark, "House")
    names = [box.name for box in house.objects]
    assert names[:7] == ["cabinet_1", "chair_1", "chair_4", "chair_3", "chair_6", "chair_2", "chair_5"]
    assert [box.label for box in house.objects] == sorted(box.label for box in house.objects)
    for label in {box.label for box in house.objects}:
        ids = [box.id for box in house.objects if box.label == label]
        assert ids == sorted(ids)
    assert list(house.by_name) == names and house.box("chair_3") is house.objects[3]
    with pytest.raises(KeyError):
        house.box("chair_99")


@pytest.mark.parametrize(("name", "count"), [("House", 23), ("Office", 51), ("Restaurant", 39)])
def test_object_counts(benchmark: Benchmark, name: str, count: int) -> None:
    assert len(load_scene(benchmark, name).objects) == count


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("House", [[-0.198, 0.100], [5.028, 10.606]]),
        ("Office", [[-0.501, -0.114], [10.074, 16.859]]),
        ("Restaurant", [[-0.217, -0.858], [7.357, 10.978]]),
    ],
)
def test_sampler_range_from_bounds_and_margins(benchmark: Benchmark, name: str, allowed: list[list[float]]) -> None:
    scene = load_scene(benchmark, name)
    assert scene.bounds.dtype == np.float32 and scene.bounds.shape == (2, 3)
    np.testing.assert_allclose(scene.allowed_xy, allowed, atol=5e-4)
    low, high = scene.allowed_xy
    inside_edge_outside = np.array([low, high, (low + high) / 2, low - 0.01, [high[0] + 0.01, high[1]]])
    assert scene.within_allowed(inside_edge_outside).tolist() == [True, True, True, False, False]


def test_negative_margins_reach_past_the_scene_box(benchmark: Benchmark) -> None:
    office = load_scene(benchmark, "Office")
    assert office.within_allowed(np.array([[-0.4, -0.1], [10.0, 16.8]])).all()


def test_load_scene_is_cached_per_data_directory(benchmark: Benchmark) -> None:
    first = load_scene(benchmark, "Office")
    again = load_scene(Benchmark.open(benchmark.root), "Office")  # another Benchmark object, the same directory
    assert again is first


def test_hand_made_scene_sorts_like_the_reference() -> None:
    boxes = [make_box("chair_2", box_id=0), make_box("bed_1", box_id=1), make_box("chair_1", box_id=2)]
    assert [box.name for box in scene_order(boxes)] == ["bed_1", "chair_2", "chair_1"]
    scene: Scene = make_scene(*boxes)
    assert [box.id for box in scene.objects] == [1, 0, 2]
