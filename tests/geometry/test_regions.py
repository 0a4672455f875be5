from __future__ import annotations

import json

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.regions import ClusteringSettings, cluster_sizes, clusters_text, object_clusters
from edsb.geometry.scene import load_scene
from tests.support.scenes import make_box, make_scene


@pytest.mark.parametrize(
    ("name", "sizes"), [("House", [5, 5, 6, 7]), ("Office", [3, 4, 4, 13, 26]), ("Restaurant", [7, 10, 22])]
)
def test_cluster_sizes_match_the_protocol(benchmark: Benchmark, name: str, sizes: list[int]) -> None:
    assert cluster_sizes(load_scene(benchmark, name)) == sizes


def test_clusters_drop_noise_and_keep_scene_order() -> None:
    boxes = [
        make_box("chair_1", (0.0, 0.0), width=0.5, depth=0.5, box_id=0),
        make_box("chair_2", (0.8, 0.0), width=0.5, depth=0.5, box_id=1),
        make_box("bed_1", (0.4, 0.9), width=0.5, depth=0.5, box_id=2),
        make_box("lamp_1", (9.0, 9.0), width=0.5, depth=0.5, box_id=3),
    ]
    assert object_clusters(make_scene(*boxes)) == [["bed_1", "chair_1", "chair_2"]]
    assert object_clusters(make_scene(*boxes), ClusteringSettings(eps=0.1)) == []


def test_clusters_text_lines(benchmark: Benchmark) -> None:
    text = clusters_text(load_scene(benchmark, "Restaurant"))
    lines = text.splitlines()
    assert [line.split(":")[0] for line in lines] == ["- Cluster 0", "- Cluster 1", "- Cluster 2"]
    assert [len(json.loads(line.split(": ", 1)[1])) for line in lines] == [7, 10, 22]
    assert text.endswith("\n")
