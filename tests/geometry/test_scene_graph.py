from __future__ import annotations

import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.geometry.scene_graph import Edge, SceneGraph, build_scene_graph, rewrite_predicate, scene_graph_of
from tests.support.scenes import make_box, make_scene


@pytest.mark.parametrize(("name", "total"), [("House", 86), ("Office", 263), ("Restaurant", 169)])
def test_edge_totals(benchmark: Benchmark, name: str, total: int) -> None:
    graph = scene_graph_of(load_scene(benchmark, name))
    assert len(graph) == total
    assert sum(len(graph.edges_from(n)) for n in graph.names) == total


def test_restaurant_keeps_its_implausible_inside_edges(benchmark: Benchmark) -> None:
    graph = scene_graph_of(load_scene(benchmark, "Restaurant"))
    assert Edge("laptop_1", "potted_plant_2", "inside") in graph.edges


def test_listing_groups_by_anchor_in_first_seen_order() -> None:
    edges = [Edge("a_1", "b_1", "close to"), Edge("a_1", "c_1", "behind"), Edge("a_1", "b_1", "in front of")]
    graph = SceneGraph(["a_1", "b_1", "c_1"], [*edges, Edge("c_1", "b_1", "on")])
    assert graph.edges_from("a_1") == (edges[0], edges[2], edges[1])
    assert graph.relationships_of("a_1") == ["close to b_1", "in front of b_1", "behind c_1"]
    assert graph.edges_from("a_1", "behind") == (edges[1],)
    assert graph.edges_to("b_1") == (edges[0], edges[2], Edge("c_1", "b_1", "on"))
    assert graph.edges_to("b_1", ("on", "close to")) == (edges[0], Edge("c_1", "b_1", "on"))
    assert graph.support_of("c_1") == "b_1" and graph.support_of("a_1") is None
    with pytest.raises(KeyError):
        graph.edges_to("zzz_1")


def _cups_on_a_table():
    """Ids 15, 16, 17 on a table: a Python set of them iterates 16, 17, 15."""
    table = make_box("table_1", (5.0, 5.0), width=3.0, depth=2.0, height=0.75, box_id=0, has_orientation=False)
    fillers = [make_box(f"plant_{i}", (20.0 + 3 * i, 0.0), width=0.5, depth=0.5, box_id=i) for i in range(1, 15)]
    cups = [
        make_box(
            f"cup_{k + 1}",
            (4.6 + 0.4 * k, 5.0),
            width=0.2,
            depth=0.2,
            height=0.1,
            min_z=0.75,
            box_id=15 + k,
            has_orientation=False,
        )
        for k in range(3)
    ]
    return make_scene(table, *fillers, *cups, size=(70.0, 10.0))


def test_support_groups_are_swept_in_set_iteration_order() -> None:
    graph = build_scene_graph(_cups_on_a_table())
    assert graph.edges[:3] == tuple(Edge(f"cup_{k}", "table_1", "on") for k in (1, 2, 3))
    horizontal = [(e.target, e.anchor, e.predicate) for e in graph.edges[3:]]
    assert horizontal == [
        ("cup_2", "cup_3", "adjacent to"),
        ("cup_2", "cup_1", "adjacent to"),
        ("cup_3", "cup_2", "adjacent to"),
        ("cup_3", "cup_1", "close to"),
        ("cup_1", "cup_2", "adjacent to"),
        ("cup_1", "cup_3", "close to"),
    ]


def test_directions_by_centre_and_by_coverage() -> None:
    desk = make_box("desk_1", (0.0, 0.0), width=2.0, depth=1.0, box_id=0)
    chair = make_box("chair_1", (0.2, 1.0), width=0.5, depth=0.5, box_id=1)
    # centre beyond the side slack, but the bench spans 75 % of the desk's front
    bench = make_box("bench_1", (1.5, 1.5), width=4.0, depth=0.4, box_id=2)
    lamp = make_box("lamp_1", (-1.6, 0.1), width=0.3, depth=0.3, box_id=3)
    graph = build_scene_graph(make_scene(desk, chair, bench, lamp))
    assert graph.relationships_of("chair_1")[:2] == ["in front of desk_1", "adjacent to desk_1"]
    assert "in front of desk_1" in graph.relationships_of("bench_1")
    assert "to the left of desk_1" in graph.relationships_of("lamp_1")
    # unoriented anchors get distance edges only
    assert all(e.predicate in ("adjacent to", "close to") for e in graph.edges_to("lamp_1") if e.target != "desk_1")


def test_vertical_relations_and_rewrites() -> None:
    radiator = make_box("radiator_1", (1.0, 1.0), width=1.0, depth=0.3, height=0.6, box_id=0)
    plant = make_box("plant_1", (1.0, 1.0), width=0.2, depth=0.2, height=0.3, min_z=0.65, box_id=1)
    table = make_box("table_1", (5.0, 5.0), width=1.0, depth=1.0, height=0.8, box_id=2)
    shelf = make_box("book_1", (5.0, 5.0), width=0.3, depth=0.2, height=0.2, min_z=0.3, box_id=3)
    lamp = make_box("lamp_1", (8.0, 8.0), width=0.4, depth=0.4, height=0.2, min_z=2.5, box_id=4)
    graph = build_scene_graph(make_scene(radiator, plant, table, shelf, lamp))
    # `on radiator` is dropped, so the plant stays hanging and is seen above the radiator instead
    assert graph.edges_from("plant_1") == (Edge("plant_1", "radiator_1", "above"),)
    assert graph.edges_to("plant_1") == (Edge("radiator_1", "plant_1", "below"),)
    # within the table's height: `inside` rewritten to `on`
    assert graph.support_of("book_1") == "table_1"
    assert graph.edges_from("lamp_1") == ()


def test_rewrite_rules_prefer_the_pair_rule() -> None:
    sink, cabinet, cup = make_box("sink_1"), make_box("cabinet_1"), make_box("cup_1")
    assert rewrite_predicate("inside", sink, cabinet) == "embedded in"
    assert rewrite_predicate("inside", make_box("microwave_1"), cabinet) == "on"
    assert rewrite_predicate("inside", cup, cabinet) == "inside"
    assert rewrite_predicate("inside", cup, make_box("kitchen_cabinet_1")) == "on"
    assert rewrite_predicate("on", cup, make_box("radiator_1")) is None
    assert rewrite_predicate(None, cup, cabinet) is None


def test_graph_floor_test_is_strict() -> None:
    # min_z = 0.1 (float32): not a floor object for the graph, unlike for collisions
    low_shelf = make_box("shelf_1", (0.0, 0.0), width=1.0, depth=0.4, min_z=0.1, box_id=0)
    floor_box = make_box("box_1", (0.9, 0.0), width=0.4, depth=0.4, box_id=1)
    graph = build_scene_graph(make_scene(low_shelf, floor_box))
    assert graph.edges == ()  # no common support group, so no horizontal edge
    raised_on_floor = make_box("shelf_1", (0.0, 0.0), width=1.0, depth=0.4, min_z=0.05, box_id=0)
    assert len(build_scene_graph(make_scene(raised_on_floor, floor_box))) > 0
