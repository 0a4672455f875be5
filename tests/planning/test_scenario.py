"""Run set-up (docs/reference.md#run-set-up): kept characters, postures, history events, availability, descriptions."""

from __future__ import annotations

from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from edsb.errors import DataError
from edsb.geometry.scene import load_scene
from edsb.geometry.scene_text import object_list_text, scene_graph_text
from edsb.planning.scenario import (
    Character,
    CharacterStateError,
    available_characters,
    build_scenario,
    cast_and_history,
    latest_plans,
    main_action,
)


def state(name: str, state: str = "idle", action: str = "idle", position=(), orientation=(), level: int = 0) -> dict:
    return {
        "idx": 0,
        "type": "distractor" if level else "essential",
        "distraction_level": level,
        "name": name,
        "state": state,
        "current_action": action,
        "position": list(position),
        "orientation": list(orientation),
    }


def entry(names: list[str], activity: str, status: str, level: int = 0, actions: dict[str, str] | None = None) -> dict:
    actions = actions or {}
    return {
        "idx": 0,
        "type": "distractor" if level else "essential",
        "distraction_level": level,
        "state": status,
        "characters": names,
        "activity": activity,
        "details": [
            {
                "character": n,
                "target_action": actions.get(n, "chat"),
                "position": [f"adjacent to table_{i + 1}"],
                "orientation": [],
            }
            for i, n in enumerate(names)
        ],
    }


def make_case(states: list[dict], history: list[dict], **extra: Any) -> TestCase:
    return TestCase.model_validate(
        {
            "id": 99,
            "tags": ["SS"],
            "scene_name": "House",
            "action_labels": ["idle", "chat", "eat"],
            "user_instruction": "",
            "planning_history": history,
            "current_states": states,
            "expected_plans": [{"character": states[0]["name"]}],
            "allow_null_plan": False,
            **extra,
        }
    )


def cast(case: TestCase, level: int = 2) -> tuple[tuple[Character, ...], tuple]:
    return cast_and_history(case.states_at(level), case.history_at(level), add_postures=True, names_from_cast=True)


def test_postures_are_appended_from_relationships() -> None:
    case = make_case(
        [
            state("Ann", action="eat", position=["sit on chair_1"], orientation=["look at Bob"]),
            state("Bob", action="watch_tv", position=["lie on couch_1"]),
            state("Cid", action="idle", position=["adjacent to sit_on_thing_1"]),
            state("Dee", action="chat", position=["sit on bed_1", "lie on bed_1"]),
        ],
        [],
    )
    characters, _ = cast(case)
    assert [c.actions for c in characters] == [
        ("eat", "sit"),
        ("watch_tv", "lie"),
        ("idle",),
        ("chat", "sit", "lie"),
    ]
    assert characters[0].relationships == ("sit on chair_1", "look at Bob")
    assert [c.main_action for c in characters] == ["eat", "watch_tv", "idle", "chat"]


def test_main_action() -> None:
    assert main_action([]) == ""
    assert main_action(["sit"]) == "sit"
    assert main_action(["sit", "eat"]) == "eat"
    assert main_action(["lie", "sit"]) == "lie"  # no non-posture action: the first one


def test_history_events_and_current_events() -> None:
    case = make_case(
        [state("Ann"), state("Bob"), state("Cid", "interacting", "chat"), state("Dee", "interacting", "chat")],
        [
            entry(["Ann"], "cooks dinner.", "completed"),
            entry(["Bob"], "reads a book", "ongoing"),
            entry(["Dee", "Cid"], "chat on the sofa", "looping"),
            entry(["Bob"], "puts the book away...", "completed"),
            entry(["Ann", "Zed"], "waits", "ongoing"),
        ],
    )
    characters, history = cast(case)
    assert [e.characters for e in history] == [("Ann",), ("Bob",), ("Cid", "Dee"), ("Bob",), ("Ann",)]
    assert [e.activity for e in history] == [
        "cooks dinner",
        "reads a book",
        "chat on the sofa",
        "puts the book away",
        "waits",
    ]
    assert history[2].label == "[Cid, Dee] chat on the sofa"
    # completed clears, later entries win
    assert {c.name: c.current_event for c in characters} == {"Ann": 4, "Bob": None, "Cid": 2, "Dee": 2}
    # details keep every listed character (even one not kept) in file order
    assert list(history[4].details) == ["Ann", "Zed"]
    assert history[2].details["Dee"].target_action == ("chat",)
    assert history[2].details["Cid"].relationships == ("adjacent to table_2",)


def test_availability_rules() -> None:
    case = make_case(
        [
            state("Free"),  # idle, no event
            state("Waiting"),  # idle, but its event is still ongoing
            state("Looping", "interacting", "chat"),
            state("Busy", "interacting", "chat"),  # interacting in an ongoing event
            state("Stuck", "interacting", "chat"),  # interacting with no event at all
            state("Done"),  # idle after a completed event
        ],
        [
            entry(["Waiting"], "waits for a friend", "ongoing"),
            entry(["Looping"], "chats", "looping"),
            entry(["Busy"], "chats", "ongoing"),
            entry(["Done"], "ate", "completed"),
        ],
    )
    characters, history = cast(case)
    assert [c.name for c in available_characters(characters, history)] == ["Free", "Looping", "Done"]


def test_moving_states_are_skipped_and_unknown_states_raise() -> None:
    characters, history = cast(make_case([state("Ann"), state("Bob", "approaching")], []))
    assert [c.name for c in available_characters(characters, history)] == ["Ann"]
    characters, history = cast(make_case([state("Ann"), state("Bob", "dancing")], []))
    with pytest.raises(CharacterStateError) as caught:
        available_characters(characters, history)
    assert caught.value.kind == "character_state" and isinstance(caught.value, ValueError)


def test_distractors_above_the_level_are_dropped() -> None:
    case = make_case(
        [state("Ann"), state("Bob", level=1), state("Cid", level=2)],
        [entry(["Bob"], "naps", "ongoing", level=1), entry(["Cid", "Ann"], "talk", "completed", level=2)],
    )
    for level, names, events in [
        (0, ["Ann"], []),
        (1, ["Ann", "Bob"], [("Bob",)]),
        (2, ["Ann", "Bob", "Cid"], [("Bob",), ("Ann", "Cid")]),
    ]:
        characters, history = cast(case, level)
        assert [c.name for c in characters] == names
        assert [e.characters for e in history] == events


def test_latest_plans_are_the_last_details_with_their_event_state() -> None:
    case = make_case(
        [state("Ann"), state("Bob")],
        [
            entry(["Ann"], "eats", "completed", actions={"Ann": "eat"}),
            entry(["Bob", "Ann"], "chat", "ongoing"),
            entry(["Bob"], "leaves", "completed", actions={"Bob": "idle"}),
        ],
    )
    _, history = cast(case)
    plans = latest_plans(history)
    assert list(plans) == ["Ann", "Bob"]
    assert (plans["Ann"].target_action, plans["Ann"].relationships, plans["Ann"].state) == (
        "chat",
        ("adjacent to table_2",),
        "ongoing",
    )
    assert (plans["Bob"].target_action, plans["Bob"].state) == ("idle", "completed")


# --- real cases -------------------------------------------------------------------------------------------------------
def test_case_43_availability_by_level(benchmark: Benchmark) -> None:
    expected = {0: ["Andrew", "Melissa"], 1: ["Andrew", "Melissa"], 2: ["Andrew", "Melissa", "Michael", "Rebecca"]}
    for level, names in expected.items():
        scenario = build_scenario(benchmark, 43, level, 0, "ours")
        assert [c.name for c in scenario.available_characters] == names
    scenario = build_scenario(benchmark, 43, 2, 0, "ours")
    melissa = scenario.characters[1]
    assert melissa.name == "Melissa" and scenario.history[melissa.current_event].state == "looping"


def test_case_51_postures_and_latest_plans(benchmark: Benchmark) -> None:
    scenario = build_scenario(benchmark, 51, 2, 0, "ours")
    actions = {c.name: c.actions for c in scenario.characters}
    assert actions["Kathryn"] == ("watch_tv", "lie")
    assert actions["Christopher"] == ("watch_tv", "sit")
    assert actions["David"] == ("idle",)
    assert [c.name for c in scenario.available_characters] == ["David", "Tammy"]
    tammy = scenario.latest_plans["Tammy"]
    assert (tammy.target_action, tammy.relationships, tammy.state) == (
        "use_coffee_maker",
        ("adjacent to coffee_maker_1", "look at coffee_maker_1"),
        "completed",
    )
    assert scenario.latest_plans["Kathryn"].state == "ongoing"


def test_kept_counts_match_the_case_table(benchmark: Benchmark) -> None:
    # docs/reference.md#case-table, characters / history entries kept at levels 0/1/2 for a few cases
    table = {
        0: ((1, 3, 5), (0, 2, 4)),
        22: ((2, 4, 5), (2, 3, 7)),
        52: ((6, 8, 9), (1, 3, 6)),
        53: ((4, 6, 8), (1, 3, 4)),
    }
    for case_id, (chars, hist) in table.items():
        for level in range(3):
            scenario = build_scenario(benchmark, case_id, level, 0, "wo-event")
            assert (len(scenario.characters), len(scenario.history)) == (chars[level], hist[level]), (case_id, level)


def test_narrative_description_is_the_repeat_file(benchmark: Benchmark) -> None:
    files = benchmark.description_files("Office")
    for repeat in (0, 4):
        scenario = build_scenario(benchmark, 1, 0, repeat, "ours")
        assert scenario.description == files[repeat].read_text(encoding="utf-8")
    with pytest.raises(DataError):
        build_scenario(benchmark, 1, 0, 5, "ours")


def test_rendered_descriptions_come_from_geometry(benchmark: Benchmark) -> None:
    scene = load_scene(benchmark, "Restaurant")
    listed = build_scenario(benchmark, 2, 0, 3, "object-list")
    assert listed.description == object_list_text(scene)
    graph = build_scenario(benchmark, 2, 0, 0, "scene-graph")
    assert graph.description == scene_graph_text(scene)
    assert build_scenario(benchmark, 2, 1, 4, "direct").description == graph.description  # same for every repeat
