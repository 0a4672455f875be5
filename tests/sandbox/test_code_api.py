"""The spatial code API on the real scenes (docs/reference.md#code-api), called directly (the sandbox is tested
separately).

Literal answers below were checked against the reference implementation run on the same scenes.
"""

from __future__ import annotations

import pytest

from edsb.geometry.distances import footprint_distance
from edsb.geometry.relations import ADJACENT_TO, CLOSE_TO
from edsb.geometry.scene import load_scene
from edsb.geometry.scene_graph import scene_graph_of
from edsb.sandbox.code_api import ApiScene, Area, CodeApi, LatestPlan, SceneObject

SCENES = ("House", "Office", "Restaurant")


def api_for(api_scenes: dict[str, ApiScene], scene: str, **latest: LatestPlan) -> CodeApi:
    return CodeApi(api_scenes[scene], latest)


# --- object queries ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scene", "call", "args", "expected"),
    [
        ("House", "get_objects_supported_by", ("table_1",), ["dvd_player_1", "loudspeaker_1", "tv_1"]),
        ("House", "get_objects_close_to", ("table_1",), ["potted_plant_1", "table_2"]),
        ("House", "get_objects_left_of", ("chair_4",), ["chair_6", "chair_2"]),  # scene order, not idx order
        ("House", "get_objects_adjacent_to", ("cabinet_1",), ["dishwasher_1", "fridge_1"]),
        ("House", "get_objects_associated_with", ("couch_1", "chairs"), ["chair_1", "chair_3"]),
        ("House", "get_closest_object", ("table_1", "chair"), "chair_1"),
        ("House", "get_closest_object", ("table_1", "piano"), "None"),
        ("Office", "get_objects_in_front_of", ("cabinet_1",), ["chair_3", "chair_8", "table_7", "table_11"]),
        ("Office", "get_objects_behind", ("cabinet_1",), ["cabinet_2", "chair_9", "chair_13"]),
        ("Office", "get_objects_associated_with", ("cabinet_2", "chair"), ["chair_9", "chair_13"]),
        ("Restaurant", "get_objects_supported_by", ("table_3", "bottles"), ["bottle_1", "bottle_2"]),  # label[:-1]
        (
            "Restaurant",
            "get_objects_associated_with",
            ("bar_counter_1", "chairs"),
            ["chair_7", "chair_8", "chair_2", "chair_1"],
        ),
        ("Restaurant", "get_objects_right_of", ("bar_counter_1",), ["potted_plant_1", "potted_plant_3"]),
    ],
)
def test_queries_on_real_scenes(api_scenes, scene: str, call: str, args: tuple, expected) -> None:
    assert getattr(api_for(api_scenes, scene), call)(*args) == expected


@pytest.mark.parametrize("scene", SCENES)
def test_close_to_and_support_follow_the_graph(benchmark, api_scenes, scene: str) -> None:
    api = api_for(api_scenes, scene)
    graph = scene_graph_of(load_scene(benchmark, scene))
    for box in api_scenes[scene].objects:
        near = [e.anchor for e in graph.edges_from(box.name, {CLOSE_TO, ADJACENT_TO})]
        assert api.get_objects_close_to(box.name) == near
        support = api.get_object_supporting(box.name)
        assert (None if support is None else str(support)) == graph.support_of(box.name)


@pytest.mark.parametrize("scene", SCENES)
def test_closest_object_minimises_the_footprint_distance(api_scenes, scene: str) -> None:
    api = api_for(api_scenes, scene)
    objects = api_scenes[scene].objects
    for anchor in objects[::5]:
        for label in (None, "chair", "table"):
            candidates = [b for b in objects if b is not anchor and (label is None or b.label == label)]
            got = api.get_closest_object(anchor.name, label)
            if not candidates:
                assert got == "None"
                continue
            best = min(footprint_distance(anchor, b) for b in candidates)
            winner = next(b for b in candidates if footprint_distance(anchor, b) == best)  # first in scene order
            assert got == winner.name


def test_label_filter_accepts_label_minus_its_last_letter(api_scenes) -> None:
    api = api_for(api_scenes, "House")
    chairs = api.get_objects_left_of("chair_4", label="chair")
    assert api.get_objects_left_of("chair_4", label="chairs") == chairs == ["chair_6", "chair_2"]
    assert api.get_objects_left_of("chair_4", label="chai") == []
    with pytest.raises(TypeError, match="not subscriptable"):
        api.get_objects_left_of("chair_4", label=3)


def test_objects_between_raises_as_the_reference_once_a_centre_projects_inside_the_segment(api_scenes) -> None:
    api = api_for(api_scenes, "Office")
    missing = "'CodeExecutor' object has no attribute 'between_threshold'"
    for label in (None, "chair", "chairs", "laptop", "tv"):  # the anchors (chairs) or objects between them
        with pytest.raises(AttributeError) as raised:
            api.get_objects_between("chair_1", "chair_6", label=label)
        assert str(raised.value) == missing
    # Only a label whose objects all project outside the segment, or no object at all, gives an answer.
    assert api.get_objects_between("chair_1", "chair_6", label="couch") == []
    assert api.get_objects_between("chair_1", "chair_6", label="stools") == []
    assert api.get_objects_between("chair_1", "chair_6", label="piano") == []
    with pytest.raises(KeyError):
        api.get_objects_between("chair_1", "chair_99")


# --- anchors that are not names ---------------------------------------------------------------------------------------


def test_unknown_anchors_fail_function_by_function(api_scenes) -> None:
    api = api_for(api_scenes, "House")
    assert api.get_objects_behind("unicorn_1") == []
    assert api.get_objects_left_of("unicorn_1") == []
    with pytest.raises(AssertionError, match="unicorn_1 is not an object in the scene"):
        api.get_objects_in_front_of("unicorn_1")
    with pytest.raises(AssertionError):
        api.get_object_supporting("unicorn_1")
    for call in (api.get_objects_close_to, api.get_objects_associated_with, api.get_closest_object):
        with pytest.raises(KeyError, match="unicorn_1"):
            call("unicorn_1")
    with pytest.raises(KeyError):
        api.get_distance_between("table_1", "unicorn_1")
    with pytest.raises(KeyError):
        api.is_object_of_label("unicorn_1", "table")
    # Area functions never check their anchors.
    assert api.get_area_close_to("unicorn_1").conditions == ["close to unicorn_1"]


def test_object_supporting_returns_a_handle_some_functions_reject(api_scenes) -> None:
    api = api_for(api_scenes, "House")
    table = api.get_object_supporting("dvd_player_1")
    assert isinstance(table, SceneObject) and not isinstance(table, str)
    assert str(table) == "table_1" and table == "table_1" and table.label == "table"
    # Accepted: string formatting, graph lookups by text, object equality.
    assert api.get_area_to_sit_on(table).conditions == ["sit on table_1"]
    assert api.get_objects_supported_by(table) == ["dvd_player_1", "loudspeaker_1", "tv_1"]
    assert api.get_objects_close_to(table) == api.get_objects_close_to("table_1")
    # Rejected: name-keyed lookups (docs/reference.md#object-handles).
    for call in (
        lambda: api.get_closest_object(table),
        lambda: api.get_objects_associated_with(table),
        lambda: api.get_distance_between(table, "table_2"),
        lambda: api.is_object_of_label(table, "table"),
    ):
        with pytest.raises(KeyError, match=r"^table_1$"):
            call()
    with pytest.raises(NotImplementedError):
        _ = table == 3


def test_distance_between_is_the_footprint_distance(api_scenes) -> None:
    api = api_for(api_scenes, "Restaurant")
    scene = api_scenes["Restaurant"]
    value = api.get_distance_between("table_1", "chair_7")
    assert type(value) is float
    assert value == pytest.approx(footprint_distance(scene.by_name["table_1"], scene.by_name["chair_7"]), abs=1e-9)
    assert api.is_object_of_label("table_1", "table") is True
    assert api.is_object_of_label("table_1", "tables") is False


# --- occupancy (docs/reference.md#is_object_occupied) -----------------------------------------------------------------


def test_occupied_seats_come_from_latest_plans_whatever_their_state(api_scenes) -> None:
    api = api_for(
        api_scenes,
        "House",
        Ann=LatestPlan("eat", ("sit on chair_1", "look at table_3"), "completed"),
        Bob=LatestPlan("sleep", ("lie on couch_1",), "ongoing"),
    )
    assert api.is_object_occupied("chair_1") is True  # even though Ann's event is completed
    assert api.is_object_occupied("couch_1") is True
    assert api.is_object_occupied("chair_3") is False
    assert api.is_object_occupied(api.get_object_supporting("toaster_1")) is False


def test_occupancy_never_detects_appliances_in_use(api_scenes) -> None:
    api = api_for(api_scenes, "House", Cid=LatestPlan("use_coffee_maker", ("adjacent to coffee_maker_1",), "ongoing"))
    assert api.is_object_occupied("coffee_maker_1") is False


def test_occupancy_fails_on_a_pending_plan_anchored_on_a_character(api_scenes) -> None:
    pending = LatestPlan("chat", ("adjacent to Ann",), "ongoing")
    with pytest.raises(KeyError, match="Ann"):
        api_for(api_scenes, "House", Dan=pending).is_object_occupied("chair_1")
    completed = LatestPlan("chat", ("adjacent to Ann",), "completed")
    assert api_for(api_scenes, "House", Dan=completed).is_object_occupied("chair_1") is False


# --- areas and handles ------------------------------------------------------------------------------------------------


def test_area_functions_and_intersection(api_scenes) -> None:
    api = api_for(api_scenes, "House")
    areas = {
        "get_area_to_interact_with": "adjacent to x",
        "get_area_to_sit_on": "sit on x",
        "get_area_adjacent_to": "adjacent to x",
        "get_area_close_to": "close to x",
        "get_area_in_front_of": "in front of x",
        "get_area_behind": "behind x",
        "get_area_left_of": "to the left of x",
        "get_area_right_of": "to the right of x",
    }
    for call, condition in areas.items():
        assert getattr(api, call)("x").conditions == [condition]
    assert api.get_area_between("a", "b").conditions == ["between a and b"]
    assert api.get_area_aligned_with("a", "b").conditions == ["aligned with a and b"]
    both = api.get_intersected_area(api.get_area_close_to("a"), api.get_area_in_front_of("b"))
    assert both == Area(["close to a", "in front of b"])
    with pytest.raises(AttributeError, match="conditions"):
        api.get_intersected_area("close to a", both)


def test_character_setters_store_what_they_are_given(api_scenes) -> None:
    api = api_for(api_scenes, "House")
    ann = api.get_character("Ann")
    area = api.get_area_to_sit_on("chair_1")
    ann.set_position(area)
    area.conditions.append("close to table_3")  # the entry aliases the Area's list, as in the reference
    ann.set_orientation(api.get_object_supporting("toaster_1"))
    ann.set_orientation("Bob")  # replaces the previous orientation
    api.get_character("Bob").set_target_action(["idle"])
    [first, second] = api._plan_entries()
    assert (first.character, first.position, first.target_action, first.orientation) == (
        "Ann",
        ["sit on chair_1", "close to table_3"],
        "",
        ["look at Bob"],
    )
    assert (second.position, second.target_action, second.orientation) == ([], ["idle"], None)
    with pytest.raises(ValueError, match="Area or a list"):
        ann.set_position("sit on chair_1")
    with pytest.raises(TypeError, match="unhashable"):
        api.get_character(["Ann"]).set_target_action("eat")


def test_parameter_names_follow_the_reference(api_scenes) -> None:
    api = api_for(api_scenes, "House")
    assert api.get_closest_object(anchor="table_1", label="chair") == "chair_1"
    with pytest.raises(TypeError):
        api.get_area_to_interact_with(object="fridge_1")  # the prompt's wording, not the reference's
    with pytest.raises(TypeError):
        api.get_distance_between(object_1="table_1", object_2="table_2")
