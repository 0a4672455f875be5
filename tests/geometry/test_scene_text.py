from __future__ import annotations

import hashlib
import json

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.geometry.scene_text import object_list_text, scene_graph_text
from tests.support.scenes import make_box, make_scene

# docs/reference.md#description-texts: the reference's texts (UTF-8, no trailing newline).
REFERENCE_TEXTS = {
    "House": (
        304,
        "9cef3231704e1c2389c35436e596b5d78fc34f771c3940bd74f737497f7f20b2",
        7476,
        "6aac224935d39486d25daff880199edaf16c6af3ab9dea06166c2b0011c1035f",
    ),
    "Office": (
        613,
        "029de419b09b3c5589db87c908d1e2f45fe82d2763ddef32e505411410e15fa6",
        18434,
        "c12eebdf5aec08b2733b63eee7bf90a285e08e0d0380599b5fd6eae25f2c42ef",
    ),
    "Restaurant": (
        503,
        "76223c72bd8ce394b97198b5714c19c91ffeef77cccf1faab98f75dcfb8e5198",
        12849,
        "375e129c4fb3224205bb589faec66bb57a945693f815e17c0043ef335adbae3d",
    ),
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("name", sorted(REFERENCE_TEXTS))
def test_texts_match_the_reference_byte_for_byte(benchmark: Benchmark, name: str) -> None:
    list_chars, list_sha, graph_chars, graph_sha = REFERENCE_TEXTS[name]
    scene = load_scene(benchmark, name)
    objects = object_list_text(scene)
    graph = scene_graph_text(scene)
    assert (len(objects), _sha(objects)) == (list_chars, list_sha)
    assert (len(graph), _sha(graph)) == (graph_chars, graph_sha)


def test_scene_graph_text_layout_and_negative_zero_quirk() -> None:
    # front truncates to [-0.05, 0.99, 0.0]; the textual `-0.0` → `0.0` fold turns -0.05 into 0.05
    # (docs/reference.md#negative-zero-text)
    desk = make_box("desk_1", (1.234, 2.0), facing_deg=92.9, width=1.0, depth=0.5, height=0.8, box_id=0)
    lamp = make_box(
        "lamp_1", (1.234, 2.0), width=0.2, depth=0.2, height=0.3, min_z=0.8, box_id=1, has_orientation=False
    )
    text = scene_graph_text(make_scene(desk, lamp))
    parsed = json.loads(text)
    assert list(parsed) == ["desk_1", "lamp_1"]
    assert parsed["desk_1"]["orientation"] == [0.05, 0.99, 0.0]
    assert '"orientation": [0.05, 0.99, 0.0]' in text
    assert '"position": [1.23, 2.0, 0.4]' in text
    assert parsed["desk_1"]["volume"] == 0.4 and "relationships" not in parsed["desk_1"]
    assert "orientation" not in parsed["lamp_1"]
    assert '        "relationships": [\n            "on desk_1"\n        ]' in text
    assert not text.endswith("\n")


def test_object_list_is_a_python_list_literal() -> None:
    scene = make_scene(make_box("chair_2", box_id=0), make_box("bed_1", box_id=1))
    assert object_list_text(scene) == "['bed_1', 'chair_2']"
