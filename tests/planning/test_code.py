"""Code extraction, the reference's rewrite and the conversion of executed handles into a plan (§4.1, §4.5)."""

from __future__ import annotations

import random
import re

import pytest

from edsb.planning.code import (
    CodeError,
    Opaque,
    RawCharacterPlan,
    RawPlan,
    exception_text,
    extract_code,
    plan_from_raw,
    prepare_code,
)
from edsb.planning.code_api import API_FUNCTIONS
from tests.support.data import DATA


@pytest.fixture(scope="module")
def prompt_text() -> str:
    path = DATA / "src/action_planning/event_parser/system_messages/event_parser.txt"
    if not path.is_file():
        pytest.fail(f"benchmark data not found at {DATA} (set EDSB_DATA)")
    return path.read_text(encoding="utf-8")


# The reference's block pattern, written with DOTALL: used only to check the linear scan on short inputs.
LAZY_BLOCK = re.compile(r"```python\s*\n(.+?)\n\s*```", re.DOTALL)


def regex_extract(reply: str) -> str:
    match = LAZY_BLOCK.search(reply)
    return match.group(1) if match else reply


# --- extraction -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("Here:\n```python\ndef parse_event():\n    pass\n```\nDone.", "def parse_event():\n    pass"),
        ("```python   \n\nx = 1\n  ```", "x = 1"),  # spaces then newlines after the tag: body starts after the last
        ("```Python\nx = 1\n```", "```Python\nx = 1\n```"),  # case matters: the whole reply is the code
        ("```python x = 1\n```", "```python x = 1\n```"),  # no newline after the tag
        ("```\nx = 1\n```", "```\nx = 1\n```"),  # an untagged fence is not a code block
        ("```python\nx = 1```", "```python\nx = 1```"),  # the closing fence must follow a newline
        ("```python\na\n```\n```python\nb\n```", "a"),  # the first block wins
        ("just prose", "just prose"),
        ("```python\n\n```", "```python\n\n```"),  # an empty body does not count
        ("```python\n```python\nx\n```", "```python\nx"),  # the lazy body may contain a second opening tag
    ],
)
def test_extract_code_cases(reply: str, code: str) -> None:
    assert extract_code(reply) == code
    assert regex_extract(reply) == code


def test_extract_code_matches_the_lazy_pattern_on_random_replies() -> None:
    rng = random.Random(7)
    pieces = ["```python", "```", "\n", " ", "\t", "x", "python", "\n  ```", "``"]
    for _ in range(3000):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert extract_code(reply) == regex_extract(reply), repr(reply)


@pytest.mark.timeout(60)  # a hang guard: the backtracking pattern would take hours on this reply
def test_extract_code_does_not_backtrack_on_whitespace_floods() -> None:
    reply = "```python" + "\n" * 200_000 + "x"  # quadratic (or worse) for the backtracking pattern
    assert extract_code(reply) == reply


# --- the rewrite ------------------------------------------------------------------------------------------------------


def test_api_functions_are_the_ones_the_prompt_advertises(prompt_text: str) -> None:
    advertised = set(re.findall(r"`((?:get|is)_\w+)\(", prompt_text))
    assert advertised <= set(API_FUNCTIONS)
    assert set(API_FUNCTIONS) - advertised == {"get_character", "get_objects_adjacent_to"}


def test_prepare_code_rewrites_exact_headers_and_every_api_name() -> None:
    code = 'def parse_event():\n    c = get_character("A")\n    # get_closest_object in a comment\n'
    assert prepare_code(code) == (
        'def parse_event(self):\n    c = self.get_character("A")\n    # self.get_closest_object in a comment'
    )
    assert prepare_code("def generate_next_plan():\n    pass").startswith("def parse_event(self):")


def test_prepare_code_is_plain_substring_substitution() -> None:
    assert prepare_code("my_get_character()") == "my_self.get_character()"
    assert prepare_code("self.get_character()") == "self.self.get_character()"
    assert prepare_code("def get_closest_object_2(x):") == "def self.get_closest_object_2(x):"
    # Longest names win where one could start inside another match; other signatures are left alone.
    assert prepare_code("def parse_event() -> None:") == "def parse_event() -> None:"
    assert prepare_code("def parse_event(self):") == "def parse_event(self):"


def test_prepare_code_strips_only_the_ends() -> None:
    # A uniformly indented block loses the first line's indentation only: the code then fails to compile.
    assert prepare_code("    x = 1\n    y = 2\n") == "x = 1\n    y = 2"


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


def test_exception_text_keeps_the_class_name() -> None:
    assert exception_text(KeyError("chair_99")) == "KeyError: 'chair_99'"
    assert exception_text(AssertionError()) == "AssertionError"
