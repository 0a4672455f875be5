"""The judge against the reference (docs/reference.md#evaluator, docs/reference.md#quirks): worked verdicts,
equivalences, quirks, odd plan shapes, PI boundaries."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from edsb.data.models import ExpectedPlan
from edsb.geometry.collision import first_collision, floor_collisions
from edsb.results import ErrorKind
from edsb.scoring.judge import Judge
from edsb.scoring.position import position_atom_mask
from edsb.scoring.verdict import Verdict

PASS = Verdict(True)
FAIL = Verdict(False)


def plan_of(name: str, actions: object, relationships: object) -> dict[str, object]:
    return {name: {"target_action": actions, "relationships": relationships}}


def outcome(verdict: Verdict) -> str | bool:
    """True / False for a judged plan, the error kind for an execution error."""
    return verdict.error.value if verdict.error else verdict.passed


# --- worked verdicts (docs/reference.md#worked-verdicts) ---------------------------------------------------------


def test_case_0_close_to_accepts_adjacent_to(judge_for) -> None:
    assert judge_for(0).judge(plan_of("Ryan", ["use_smartphone"], ["adjacent to table_3"])) == PASS


def test_case_0_look_at_is_not_close_to(judge_for) -> None:
    assert judge_for(0).judge(plan_of("Ryan", ["use_smartphone"], ["look at table_3"])) == FAIL


def test_case_0_unknown_action_text_is_an_execution_error(judge_for) -> None:
    verdict = judge_for(0).judge(plan_of("Ryan", ["text"], ["adjacent to table_3"]))
    assert not verdict.passed
    assert verdict.error is ErrorKind.UNKNOWN_ACTION
    assert verdict.describe_error().startswith("unknown_action: ")


def test_case_13_sit_posture_is_an_allowed_action(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", ["eat", "sit"], ["sit on chair_6"])) == PASS


def test_case_13_wrong_chair_fails(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", ["eat", "sit"], ["sit on chair_3"])) == FAIL


def test_case_21_empty_plan_passes(judge_for) -> None:
    assert judge_for(21).judge({}) == PASS


def test_case_21_wrong_action_fails(judge_for) -> None:
    assert judge_for(21).judge(plan_of("Christopher", ["use_coffee_maker"], [])) == FAIL


def test_case_21_only_melissa_is_an_execution_error(judge_for) -> None:
    verdict = judge_for(21).judge(plan_of("Melissa", ["idle"], []))
    assert verdict.error is ErrorKind.MISSING_CHARACTER


def test_case_44_needs_both_characters(judge_for) -> None:
    verdict = judge_for(44).judge(plan_of("Jason", ["eat", "sit"], ["sit on chair_4"]))
    assert verdict.error is ErrorKind.MISSING_CHARACTER
    assert "Kimberly" in verdict.message


# --- null plans --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("empty", [{}, [], None, "", 0, False])
def test_any_empty_value_is_a_null_plan_where_allowed(judge_for, empty: object) -> None:
    assert judge_for(21).judge(empty) == PASS


def test_case_21_idle_plan_passes(judge_for) -> None:
    assert judge_for(21).judge(plan_of("Christopher", ["idle"], ["sit on chair_1"])) == PASS


def test_empty_plan_elsewhere_is_a_missing_character(judge_for) -> None:
    assert outcome(judge_for(0).judge({})) == "missing_character"


@pytest.mark.parametrize("plan", [[], None, "Ryan", 3, [{"Ryan": {}}]])
def test_a_planning_result_that_is_not_an_object_is_malformed(judge_for, plan: object) -> None:
    assert outcome(judge_for(0).judge(plan)) == "malformed_plan"


# --- action check (docs/reference.md#action-check) ---------------------------------------------------------------


def test_lie_is_an_allowed_action(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", ["lie", "eat"], ["sit on chair_6"])) == PASS


def test_empty_string_action_left_by_unset_code_is_an_error(judge_for) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", ["eat", ""], ["sit on chair_6"]))) == "unknown_action"


def test_an_invalid_label_errors_even_when_the_condition_holds(judge_for) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", ["eat", "Eat"], ["sit on chair_6"]))) == "unknown_action"


def test_label_of_another_case_is_unknown(judge_for) -> None:
    # `work_on_computer` is an Office label; case 13 is in the House.
    assert outcome(judge_for(13).judge(plan_of("David", ["work_on_computer"], []))) == "unknown_action"


def test_action_given_as_a_string_is_iterated_letter_by_letter(judge_for) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", "eat", ["sit on chair_6"]))) == "unknown_action"


def test_empty_action_string_passes_validation_but_matches_nothing(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", "", ["sit on chair_6"])) == FAIL


def test_action_object_counts_its_keys(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", {"eat": 1, "sit": 0}, ["sit on chair_6"])) == PASS


@pytest.mark.parametrize("actions", [None, 3, True, 1.5])
def test_action_that_cannot_be_iterated_is_malformed(judge_for, actions: object) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", actions, ["sit on chair_6"]))) == "malformed_plan"


@pytest.mark.parametrize("bad", [5, None, ["eat"], {"eat": 1}])
def test_non_string_action_labels_are_unknown(judge_for, bad: object) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", ["eat", bad], ["sit on chair_6"]))) == "unknown_action"


def test_null_action_condition_accepts_any_valid_actions(judge_for) -> None:
    # Case 4 expects no particular action, only `close to table_2`.
    assert judge_for(4).judge(plan_of("David", ["dance", "sit"], ["adjacent to table_2"])) == PASS
    assert judge_for(4).judge(plan_of("David", [], ["close to table_2"])) == PASS


def test_or_of_actions(judge_for) -> None:
    # Case 12: `order_food || order_drink`.
    assert judge_for(12).judge(plan_of("John", ["order_drink", "sit"], ["sit on chair_9"])) == PASS
    assert judge_for(12).judge(plan_of("John", ["eat", "sit"], ["sit on chair_9"])) == FAIL


def test_negated_action_atoms(judge_for) -> None:
    judge = judge_for(13, expected_plans=[ExpectedPlan(character="David", target_action="!eat && sit")])
    assert judge.judge(plan_of("David", ["drink", "sit"], [])) == PASS
    assert judge.judge(plan_of("David", ["eat", "sit"], [])) == FAIL
    assert judge.judge(plan_of("David", ["drink"], [])) == FAIL


def test_relationships_are_not_read_when_the_action_fails(judge_for) -> None:
    assert judge_for(13).judge({"David": {"target_action": ["drink"]}}) == FAIL
    assert outcome(judge_for(13).judge({"David": {"target_action": ["eat"]}})) == "malformed_plan"


def test_missing_target_action_is_malformed(judge_for) -> None:
    assert outcome(judge_for(13).judge({"David": {"relationships": ["sit on chair_6"]}})) == "malformed_plan"


@pytest.mark.parametrize("entry", [[], "eat", None, 7])
def test_character_entry_that_is_not_an_object_is_malformed(judge_for, entry: object) -> None:
    assert outcome(judge_for(13).judge({"David": entry})) == "malformed_plan"


def test_extra_characters_are_ignored(judge_for) -> None:
    plan = plan_of("David", ["eat"], ["sit on chair_6"]) | {"Nobody": "nonsense", "Melissa": []}
    assert judge_for(13).judge(plan) == PASS


def test_character_names_are_case_sensitive(judge_for) -> None:
    assert outcome(judge_for(13).judge(plan_of("david", ["eat"], ["sit on chair_6"]))) == "missing_character"


# --- relationship check (docs/reference.md#relationship-check) ---------------------------------------------------


def test_adjacent_to_does_not_accept_close_to(judge_for) -> None:
    # Case 11: `adjacent to cabinet_3 || in front of cabinet_3`.
    assert judge_for(11).judge(plan_of("Jesse", ["open_cabinet"], ["close to cabinet_3"])) == FAIL
    assert judge_for(11).judge(plan_of("Jesse", ["open_cabinet"], ["adjacent to cabinet_3"])) == PASS


def test_close_to_accepts_both_distances(judge_for) -> None:
    # Case 24: `close to table_2`.
    for relation in ("close to table_2", "adjacent to table_2"):
        assert judge_for(24).judge(plan_of("Michael", ["drink"], [relation])) == PASS
    assert judge_for(24).judge(plan_of("Michael", ["drink"], ["interact with table_2"])) == FAIL
    assert judge_for(24).judge(plan_of("Michael", ["drink"], ["adjacent to table_3"])) == FAIL


def test_inside_accepts_sit_on_lie_on_and_inside(judge_for) -> None:
    judge = judge_for(13, expected_plans=[ExpectedPlan(character="David", relationships="inside couch_1")])
    for relation in ("sit on couch_1", "lie on couch_1", "inside couch_1"):
        assert judge.judge(plan_of("David", ["idle"], [relation])) == PASS
    assert judge.judge(plan_of("David", ["idle"], ["adjacent to couch_1"])) == FAIL


def test_sit_on_does_not_accept_inside(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", ["eat"], ["inside chair_6"])) == FAIL


def test_between_needs_the_identical_string(judge_for) -> None:
    # Case 0: `close to table_3 || between chair_1 and chair_3`.
    assert judge_for(0).judge(plan_of("Ryan", ["use_smartphone"], ["between chair_1 and chair_3"])) == PASS
    assert judge_for(0).judge(plan_of("Ryan", ["use_smartphone"], ["between chair_3 and chair_1"])) == FAIL


def test_conjunction_inside_parentheses(judge_for) -> None:
    # Case 10: `between chair_1 and chair_3 || (in front of chair_1 && in front of chair_3)`.
    both = ["in front of chair_1", "in front of chair_3"]
    assert judge_for(10).judge(plan_of("Kenneth", ["use_smartphone"], both)) == PASS
    assert judge_for(10).judge(plan_of("Kenneth", ["use_smartphone"], both[:1])) == FAIL


def test_predicate_whitelist_is_a_prefix_test(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", ["eat"], ["sit on chair_6", "behindX"])) == PASS
    assert judge_for(13).judge(plan_of("David", ["eat"], ["sit on chair_6", "look at the ceiling"])) == PASS


@pytest.mark.parametrize("relation", ["on table_1", "near chair_6", "Sit on chair_6", " sit on chair_6", "sit"])
def test_unknown_predicates_are_execution_errors(judge_for, relation: str) -> None:
    verdict = judge_for(13).judge(plan_of("David", ["eat"], ["sit on chair_6", relation]))
    assert outcome(verdict) == "unknown_relationship"


def test_plan_anchors_are_not_validated(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", ["eat"], ["sit on chair_99"])) == FAIL


def test_relationships_given_as_a_string_are_iterated_letter_by_letter(judge_for) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", ["eat"], "sit on chair_6"))) == "unknown_relationship"
    assert judge_for(13).judge(plan_of("David", ["eat"], "")) == FAIL


def test_relationship_object_counts_its_keys(judge_for) -> None:
    assert judge_for(13).judge(plan_of("David", ["eat"], {"sit on chair_6": True})) == PASS


@pytest.mark.parametrize("relationships", [None, 4, False])
def test_relationships_that_cannot_be_iterated_are_malformed(judge_for, relationships: object) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", ["eat"], relationships))) == "malformed_plan"


def test_a_non_string_relationship_is_malformed(judge_for) -> None:
    assert outcome(judge_for(13).judge(plan_of("David", ["eat"], [5, "sit on chair_6"]))) == "malformed_plan"


def test_null_relationship_condition_accepts_valid_relationships(judge_for) -> None:
    assert judge_for(21).judge(plan_of("Christopher", ["idle"], ["look at Melissa", "close to tv_1"])) == PASS
    assert outcome(judge_for(21).judge(plan_of("Christopher", ["idle"], ["stand by tv_1"]))) == "unknown_relationship"


def test_unknown_expected_anchor_errors_even_if_an_earlier_atom_holds(judge_for) -> None:
    judge = judge_for(
        13, expected_plans=[ExpectedPlan(character="David", relationships="sit on chair_6 || sit on chair_99")]
    )
    assert outcome(judge.judge(plan_of("David", ["eat"], ["sit on chair_6"]))) == "unknown_anchor"


def test_look_at_anchor_may_be_a_character_kept_at_the_level(judge_for) -> None:
    # Norma is a level-1 distractor of case 0: unknown at level 0, a valid anchor from level 1.
    expected = [ExpectedPlan(character="Ryan", relationships="look at Norma")]
    plan = plan_of("Ryan", [], ["look at Norma"])
    assert outcome(judge_for(0, 0, expected_plans=expected).judge(plan)) == "unknown_anchor"
    assert judge_for(0, 1, expected_plans=expected).judge(plan) == PASS


def test_two_anchor_atoms_need_objects_at_both_ends(judge_for) -> None:
    expected = [ExpectedPlan(character="Ryan", relationships="between chair_1 and Norma")]
    assert outcome(judge_for(0, 2, expected_plans=expected).judge(plan_of("Ryan", [], []))) == "unknown_anchor"


@pytest.mark.parametrize("condition", ["sit on chair_6 ||", "(sit on chair_6", "sit on chair_6 ) x", "  "])
def test_malformed_expected_condition(judge_for, condition: str) -> None:
    judge = judge_for(13, expected_plans=[ExpectedPlan(character="David", relationships=condition)])
    assert outcome(judge.judge(plan_of("David", ["eat"], ["sit on chair_6"]))) == "malformed_condition"


# --- two-character cases (44, 53, 54) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case_id", "first", "second", "seats"),
    [
        (44, "Jason", "Kimberly", ("chair_4", "chair_5")),
        (53, "Luis", "Stefanie", ("chair_9", "chair_3")),
        (54, "Thomas", "Brenda", ("chair_8", "chair_7")),
    ],
)
def test_two_character_cases(judge_for, case_id: int, first: str, second: str, seats: tuple[str, str]) -> None:
    judge = judge_for(case_id)
    action = "drink" if case_id == 54 else "eat"
    good = plan_of(first, [action, "sit"], [f"sit on {seats[0]}"]) | plan_of(
        second, [action, "sit"], [f"sit on {seats[1]}"]
    )
    assert judge.judge(good) == PASS
    wrong_second = good | plan_of(second, [action], ["sit on chair_1"])
    assert judge.judge(wrong_second) == FAIL
    # No short-circuit between characters: a failing first character does not hide an error in the second.
    broken = plan_of(first, ["chat"], [f"sit on {seats[0]}"]) | plan_of(second, ["bogus"], [])
    assert outcome(judge.judge(broken)) == "unknown_action"


# --- PI: position and collision (docs/reference.md#position-check, #collision-check) -----------------------------


def world_point(box, canonical: tuple[float, float]) -> list[float]:
    """A world point given in the box's frame (front along +y, right along +x)."""
    rotation = box.rotation.astype(np.float64)
    return (box.center[:2].astype(np.float64) + rotation.T @ np.asarray(canonical)).tolist()


def pi_plan(judge: Judge, position: object) -> dict[str, object]:
    return {judge.case.expected_plans[0].character: {"sampled_position": position}}


def anchor_of(judge: Judge):
    return judge.scene.by_name[judge.case.expected_plans[0].sampled_position.split(" ")[-1]]


@pytest.mark.parametrize(("case_id", "face"), [(61, "front"), (62, "right"), (68, "back")])
def test_adjacent_to_boundary_at_0_7(judge_for, case_id: int, face: str) -> None:
    judge = judge_for(case_id)
    box = anchor_of(judge)
    direction, half = {
        "front": ((0, 1), box.half_depth),
        "back": ((0, -1), box.half_depth),
        "right": ((1, 0), box.half_width),
    }[face]
    for delta, expected in ((-1e-3, PASS), (1e-3, FAIL)):
        reach = half + 0.7 + delta
        point = world_point(box, (direction[0] * reach, direction[1] * reach))
        assert judge.judge(pi_plan(judge, point)) == expected, delta


@pytest.mark.parametrize(
    ("case_id", "depth_out", "side"),
    [(60, 0.4, 1), (64, 0.4, -1), (65, 0.6, 1), (66, 0.4, 1), (67, 0.4, -1), (69, 0.2, 1)],
)
def test_directional_lateral_boundary_at_0_1(judge_for, case_id: int, depth_out: float, side: int) -> None:
    judge = judge_for(case_id)
    box = anchor_of(judge)
    predicate = judge.case.expected_plans[0].sampled_position.rsplit(" ", 1)[0]
    hw, hd = box.half_width, box.half_depth
    for delta, expected in ((-1e-3, PASS), (1e-3, FAIL)):
        canonical = {
            "in front of": (side * (hw + 0.1 + delta), hd + depth_out),
            "behind": (side * (hw + 0.1 + delta), -hd - depth_out),
            "to the right of": (hw + depth_out, side * (hd + 0.1 + delta)),
            "to the left of": (-hw - depth_out, side * (hd + 0.1 + delta)),
        }[predicate]
        assert judge.judge(pi_plan(judge, world_point(box, canonical))) == expected, delta


def test_a_colliding_point_fails_even_where_the_condition_holds(judge_for) -> None:
    judge = judge_for(61)  # adjacent to coffee_maker_1, which stands on a counter
    box = anchor_of(judge)
    xs = np.linspace(box.center[0] - 1.5, box.center[0] + 1.5, 31)
    ys = np.linspace(box.center[1] - 1.5, box.center[1] + 1.5, 31)
    grid = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2).astype(np.float32)
    holds = position_atom_mask(judge.scene, grid, "adjacent to coffee_maker_1")
    collides = floor_collisions(judge.scene, grid)
    both = grid[holds & collides]
    free = grid[holds & ~collides]
    assert len(both) and len(free)
    assert judge.judge(pi_plan(judge, both[0].tolist())) == FAIL
    assert judge.judge(pi_plan(judge, free[0].tolist())) == PASS


def test_case_63_conjunction_of_a_disjunction(judge_for) -> None:
    judge = judge_for(63)  # (in front of couch_1 || in front of couch_2) && in front of couch_3
    passing = np.argwhere(judge.position_pass_mask(lattice(judge)))
    assert len(passing) == 896
    point = lattice(judge)[passing[0, 0]].tolist()
    assert judge.judge(pi_plan(judge, point)) == PASS


def test_missing_sampled_position_is_malformed(judge_for) -> None:
    judge = judge_for(60)
    assert outcome(judge.judge({"Theodore": {"target_action": ["idle"], "relationships": []}})) == "malformed_plan"


def test_pi_does_not_check_actions_or_relationships(judge_for) -> None:
    judge = judge_for(62)
    box = anchor_of(judge)
    point = world_point(box, (0.0, box.half_depth + 0.3))
    entry = {"sampled_position": point, "target_action": ["bogus"], "relationships": ["nonsense"]}
    assert judge.judge({"Benjamin": entry}) == PASS


@pytest.mark.parametrize(
    "position", [[1.0, 2.0, 0.0], [1.0], [], [[1.0, 2.0]], "1,2", {"x": 1, "y": 2}, None, 3, ["a", "b"], [1, [2]]]
)
def test_a_position_that_is_not_an_xy_pair_is_malformed(judge_for, position: object) -> None:
    judge = judge_for(62)
    assert outcome(judge.judge(pi_plan(judge, position))) == "malformed_plan"


def test_position_numbers_may_be_strings_or_booleans(judge_for) -> None:
    judge = judge_for(62)
    box = anchor_of(judge)
    x, y = world_point(box, (0.0, box.half_depth + 0.3))
    assert judge.judge(pi_plan(judge, [str(x), str(y)])) == judge.judge(pi_plan(judge, [x, y])) == PASS
    assert judge.judge(pi_plan(judge, [True, False])) == judge.judge(pi_plan(judge, [1.0, 0.0]))


@pytest.mark.parametrize("position", [[None, 2.0], [float("nan"), 1.0], [1.0, float("nan")], ["nan", "nan"]])
def test_nan_coordinates_collide_and_fail(judge_for, position: object) -> None:
    # The reference tests "not outside" the footprint, and NaN is never outside: it collides with the first floor
    # object, so the plan fails (it is not an execution error).
    for case_id in (61, 64, 67):
        judge = judge_for(case_id)
        assert judge.judge(pi_plan(judge, position)) == FAIL


def test_area_box_condition(judge_for) -> None:
    box_plan = [ExpectedPlan(character="Benjamin", sampled_position=[2.0, 1.0, 2.5, 2.0])]
    judge = judge_for(62, expected_plans=box_plan)
    inside, outside = [2.25, 1.5], [2.25, 2.01]
    assert not floor_collisions(judge.scene, np.array([inside, outside], dtype=np.float32)).any()
    assert judge.judge(pi_plan(judge, inside)) == PASS
    assert judge.judge(pi_plan(judge, [2.5, 2.0])) == PASS  # edges included
    assert judge.judge(pi_plan(judge, outside)) == FAIL
    assert outcome(judge.judge(pi_plan(judge, [2.25]))) == "malformed_plan"


@pytest.mark.parametrize(
    ("condition", "kind"), [("adjacent to fridge_9", "unknown_anchor"), ("on top of fridge_1", "unknown_predicate")]
)
def test_broken_position_conditions(judge_for, condition: str, kind: str) -> None:
    judge = judge_for(60, expected_plans=[ExpectedPlan(character="Theodore", sampled_position=condition)])
    assert outcome(judge.judge(pi_plan(judge, [1.0, 1.0]))) == kind
    # the anchor and predicate are checked before the point's shape, as in the reference
    assert outcome(judge.judge(pi_plan(judge, [1.0, 1.0, 1.0]))) == kind


# --- PI lattice parity (docs/reference.md#worked-verdicts) -------------------------------------------------------

LATTICE = {  # id: (passing points, first 16 hex digits of the sha256 of the bit string)
    60: (685, "5d7745b288cb33b4"),
    61: (112, "a8478c77526b5a6d"),
    62: (164, "921df074ec920a0d"),
    63: (896, "a06b23301df83775"),
    64: (610, "49f1f4d6bf7811ee"),
    65: (279, "56b036d2837b06e0"),
    66: (570, "95f0a668279ef007"),
    67: (1797, "f0d3083c6c186b5e"),
    68: (288, "5ce5412ab472cec2"),
    69: (457, "1de179054468d4f0"),
}


def lattice(judge: Judge) -> np.ndarray:
    top = judge.scene.bounds[1]
    nx, ny = math.floor(10 * float(top[0])) + 1, math.floor(10 * float(top[1])) + 1
    return np.array([(i / 10, j / 10) for i in range(nx) for j in range(ny)])


@pytest.mark.parametrize("case_id", sorted(LATTICE))
def test_pi_lattice_matches_the_reference(judge_for, case_id: int) -> None:
    judge = judge_for(case_id)
    mask = judge.position_pass_mask(lattice(judge))
    bits = "".join("1" if value else "0" for value in mask)
    assert (int(mask.sum()), hashlib.sha256(bits.encode()).hexdigest()[:16]) == LATTICE[case_id]


def test_single_point_verdicts_agree_with_the_lattice_mask(judge_for) -> None:
    judge = judge_for(69)
    points = lattice(judge)[::37]
    mask = judge.position_pass_mask(points)
    assert [judge.judge(pi_plan(judge, p.tolist())).passed for p in points] == mask.tolist()


# --- failure reasons -----------------------------------------------------------------------------------------------


def test_a_failure_names_the_character_and_the_condition_it_missed(judge_for) -> None:
    judge = judge_for(13)
    wrong_chair = judge.judge(plan_of("David", ["eat", "sit"], ["sit on chair_3"]))
    condition = judge.case.expected_plans[0].relationships
    assert wrong_chair == FAIL
    assert wrong_chair.reason == f"David: relationships ['sit on chair_3'] do not satisfy {condition!r}"
    wrong_action = judge.judge(plan_of("David", ["sit"], ["sit on chair_6"]))
    assert wrong_action.reason.startswith("David: action ['sit'] does not satisfy ")
    assert judge.judge(plan_of("David", ["eat", "sit"], ["sit on chair_6"])).reason is None


def test_errors_carry_no_failure_reason(judge_for) -> None:
    verdict = judge_for(0).judge({})
    assert verdict.errored and verdict.reason is None
    assert verdict.explain() == verdict.describe_error()


def test_a_pi_failure_says_whether_the_point_missed_the_area_or_hit_an_object(judge_for) -> None:
    judge = judge_for(61)  # adjacent to coffee_maker_1, which stands on a counter
    box = anchor_of(judge)
    far = world_point(box, (0.0, box.half_depth + 3.0))
    missed = judge.judge(pi_plan(judge, far))
    assert missed == FAIL
    assert missed.reason.startswith("Franklin: position (") and "'adjacent to coffee_maker_1' holds" in missed.reason
    xs = np.linspace(box.center[0] - 1.5, box.center[0] + 1.5, 31)
    ys = np.linspace(box.center[1] - 1.5, box.center[1] + 1.5, 31)
    grid = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2).astype(np.float32)
    inside = grid[
        position_atom_mask(judge.scene, grid, "adjacent to coffee_maker_1") & floor_collisions(judge.scene, grid)
    ]
    blocked = judge.judge(pi_plan(judge, inside[0].tolist()))
    hit = judge.scene.objects[int(first_collision(judge.scene, inside[:1])[0])].name
    assert blocked == FAIL and blocked.reason.endswith(f"stands inside {hit}")
