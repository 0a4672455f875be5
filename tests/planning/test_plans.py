"""The conversion of executed handles into a plan, per planning mode (docs/reference.md#plan-conversion)."""

from __future__ import annotations

import pytest

from edsb.planning import plans
from edsb.planning.plans import plan_from_raw
from edsb.sandbox import CodeError, Opaque, RawCharacterPlan, RawPlan

# --- conversion -------------------------------------------------------------------------------------------------------


def raw(*characters: RawCharacterPlan) -> RawPlan:
    return RawPlan(tuple(characters))


def entry(name="Ann", position=None, action="eat", orientation=None) -> RawCharacterPlan:
    return RawCharacterPlan(name, [] if position is None else position, action, orientation)


def test_lcps_plan_reads_positions_orientation_and_postures() -> None:
    plan = plan_from_raw(
        raw(
            entry("Ann", ["sit on chair_1", "close to table_1"], "eat", ("look at Bob",)),
            entry("Bob", ["interact with fridge_1"], "open_fridge"),
            entry("Cid", ["close to bed_1", "lie on bed_1", "sit on sofa_1"], "sleep"),
        ),
        "event",
    )
    assert plan == {
        "Ann": {
            "target_action": ["eat", "sit"],
            "relationships": ["sit on chair_1", "close to table_1", "look at Bob"],
        },
        "Bob": {"target_action": ["open_fridge"], "relationships": ["adjacent to fridge_1"]},
        "Cid": {
            "target_action": ["sleep", "lie"],
            "relationships": ["close to bed_1", "lie on bed_1", "sit on sofa_1"],
        },
    }


def test_actions_are_deduplicated_in_first_occurrence_order() -> None:
    plan = plan_from_raw(raw(entry(position=["sit on chair_1"], action="sit")), "event")
    assert plan["Ann"]["target_action"] == ["sit"]
    # A character that never set anything keeps the reference's defaults (the judge rejects the empty action).
    assert plan_from_raw(raw(entry(position=[], action="")), "event")["Ann"] == {
        "target_action": [""],
        "relationships": [],
    }


def test_lcps_accepts_a_tuple_position_but_wo_event_cannot_add_it_to_a_list() -> None:
    plan = raw(entry(position=("close to table_1",)))
    assert plan_from_raw(plan, "event")["Ann"]["relationships"] == ["close to table_1"]
    with pytest.raises(CodeError) as failure:
        plan_from_raw(plan, "no_event")
    assert failure.value.kind == "code_plan"
    assert failure.value.message == 'TypeError: can only concatenate tuple (not "list") to tuple'


def test_non_string_relationships_fail_like_the_reference() -> None:
    with pytest.raises(CodeError, match=r"^AttributeError: 'float' object has no attribute 'startswith'$"):
        plan_from_raw(raw(entry(position=[1.0, 2.0])), "event")
    area_in_list = Opaque("Area", "Area(conditions=['sit on chair_1'])", hashable=False)
    with pytest.raises(CodeError, match="'Area' object has no attribute 'startswith'"):
        plan_from_raw(raw(entry(position=[area_in_list])), "no_event")


def test_unhashable_actions_fail_in_deduplication() -> None:
    with pytest.raises(CodeError, match=r"^TypeError: unhashable type: 'list'$"):
        plan_from_raw(raw(entry(action=["eat", "sit"])), "event")
    with pytest.raises(CodeError, match="unhashable type: 'dict'"):
        plan_from_raw(raw(entry(action=Opaque("dict", "{}", hashable=False))), "event_no_lcps")
    handle = Opaque("SceneObject", "table_1", hashable=True)
    assert plan_from_raw(raw(entry(action=handle)), "event")["Ann"]["target_action"] == ["table_1"]


def test_direct_inference_copies_the_position_list() -> None:
    plan = plan_from_raw(
        raw(entry(position=[2.17, 3.61], action="idle", orientation=("look at sofa_1",))), "event_no_lcps"
    )
    assert plan == {
        "Ann": {
            "target_action": ["idle"],
            "orientation": ["look at sofa_1"],
            "relationships": [],
            "sampled_position": [2.17, 3.61],
        }
    }
    with pytest.raises(CodeError, match=r"^AttributeError: 'tuple' object has no attribute 'copy'$"):
        plan_from_raw(raw(entry(position=(2.17, 3.61))), "event_no_lcps")


def test_first_failure_follows_the_reference_phase_order() -> None:
    # Relationships are converted for every character before any action list is deduplicated.
    plan = raw(entry("Ann", action=["x"]), entry("Bob", position=[3]))
    with pytest.raises(CodeError, match="'int' object has no attribute 'startswith'"):
        plan_from_raw(plan, "event")


def test_plan_keys_are_names_even_for_odd_character_values() -> None:
    plan = plan_from_raw(raw(entry(5), entry(Opaque("SceneObject", "table_1", True))), "event")
    assert list(plan) == ["5", "table_1"]


def test_empty_code_result_is_an_empty_plan() -> None:
    for mode in ("event", "no_event", "event_no_lcps"):
        assert plan_from_raw(RawPlan(()), mode) == {}


def test_a_fault_of_the_conversion_itself_is_not_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the failures the reference meets on what the code set are `code_plan`; a TypeError of edsb's own
    # conversion propagates (the pipeline records it as internal_error, never as the model's error).
    def broken_copy(value: object) -> object:
        raise TypeError("a bug in the copy")

    monkeypatch.setattr(plans, "_to_json", broken_copy)
    with pytest.raises(TypeError, match="a bug in the copy"):
        plan_from_raw(raw(entry()), "event")
