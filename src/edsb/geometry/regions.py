"""Regions: groups of nearby objects found by DBSCAN on the clustering distance (docs/reference.md#regions).

Only narrative-description generation uses them (the benchmark ships pre-generated texts), so they exist to rebuild
that query and to offer region hints; nothing scored depends on them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sklearn.cluster import DBSCAN

from edsb.geometry.distances import obb_distance_matrix
from edsb.geometry.scene import Scene


@dataclass(frozen=True)
class ClusteringSettings:
    eps: float = 1.0
    min_samples: int = 2


def object_clusters(scene: Scene, settings: ClusteringSettings | None = None) -> list[list[str]]:
    """Clusters of object names, noise dropped, smallest first (ties keep first-seen order); names in scene order."""
    settings = settings or ClusteringSettings()
    distances = obb_distance_matrix(scene.objects)
    labels = DBSCAN(eps=settings.eps, min_samples=settings.min_samples, metric="precomputed").fit(distances).labels_
    clusters: dict[int, list[str]] = {}
    for box, label in zip(scene.objects, labels, strict=True):
        if label != -1:
            clusters.setdefault(int(label), []).append(box.name)
    return sorted(clusters.values(), key=len)


def cluster_sizes(scene: Scene, settings: ClusteringSettings | None = None) -> list[int]:
    return [len(cluster) for cluster in object_clusters(scene, settings)]


def clusters_text(scene: Scene, settings: ClusteringSettings | None = None) -> str:
    """`- Cluster <i>: ["a", "b"]` lines, smallest cluster first, as appended to narrative-generation queries."""
    return "".join(f"- Cluster {i}: {json.dumps(names)}\n" for i, names in enumerate(object_clusters(scene, settings)))
