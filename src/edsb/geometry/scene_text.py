"""Text renderings of a scene used as planner prompts (the Object List and Scene Graph variants), byte for byte.

The scene-graph text is indent-4 JSON whose number lists are folded onto one line; while folding, the reference
replaces every `-0.0` by `0.0` as plain text, which also turns `-0.06` into `0.06`
(docs/reference.md#negative-zero-text). We reproduce that on purpose, since the prompts must match the official ones
exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from edsb.geometry.boxes import Box
from edsb.geometry.scene import Scene
from edsb.geometry.scene_graph import scene_graph_of


def object_list_text(scene: Scene) -> str:
    """The names in scene order (a perturbed scene: its listing order) as a Python list literal:
    `['cabinet_1', 'chair_1', ...]`."""
    return repr([box.name for box in scene.listed])


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(value, 2) for value in values]


def _truncated(values: Sequence[float]) -> list[float]:
    return [math.trunc(value * 100) / 100 for value in values]


def _number_list(values: list[float]) -> str:
    """One-line list with the reference's textual `-0.0` → `0.0` substitution (docs/reference.md#negative-zero-text)."""
    return "[" + ", ".join(json.dumps(value) for value in values).replace("-0.0", "0.0") + "]"


def _object_entry(box: Box, relationships: list[str], lists: list[str]) -> dict[str, object]:
    """JSON fields of one object; number lists are stood in for by placeholders filled after dumping."""

    def placeholder(values: list[float]) -> str:
        lists.append(_number_list(values))
        return f"\0{len(lists) - 1}\0"

    entry: dict[str, object] = {
        "position": placeholder(_rounded(box.center.tolist())),
        "size": placeholder(_rounded(box.aa_extents.tolist())),
        "volume": round(box.width * box.depth * box.height, 2),
    }
    if box.has_orientation:
        entry["orientation"] = placeholder(_truncated(box.front.tolist()))
    if relationships:
        entry["relationships"] = relationships
    return entry


def scene_graph_text(scene: Scene) -> str:
    """Per object: rounded centre and extents, volume, truncated orientation (oriented objects only) and the graph's
    relationships in listing order, as indent-4 JSON keyed by name in scene order (a perturbed scene: its listing
    order; each object's relationships keep the graph's order)."""
    graph = scene_graph_of(scene)
    lists: list[str] = []
    document = {box.name: _object_entry(box, graph.relationships_of(box.name), lists) for box in scene.listed}
    text = json.dumps(document, indent=4)
    for number, rendered in enumerate(lists):
        text = text.replace(json.dumps(f"\0{number}\0"), rendered, 1)
    return text
