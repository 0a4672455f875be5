"""Finding the code in a reply and the reference's rewrite (docs/reference.md#code-execution)."""

from __future__ import annotations

import random
import re

import pytest

from edsb.sandbox import API_FUNCTIONS, exception_text, extract_code, prepare_code
from edsb.sandbox.exact import reference_match
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


def test_exception_text_keeps_the_class_name() -> None:
    assert exception_text(KeyError("chair_99")) == "KeyError: 'chair_99'"
    assert exception_text(AssertionError()) == "AssertionError"


# --- the match object the exact sandbox hands to top-level code -------------------------------------------------------


def test_the_exact_sandboxs_match_has_the_lazy_patterns_spans_on_random_replies() -> None:
    rng = random.Random(11)
    pieces = ["```python", "```", "\n", " ", "\t", "x", "\r", "\n\n", "  \n", "``"]
    for _ in range(3000):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        expected, found = LAZY_BLOCK.search(reply), reference_match(reply)
        if expected is None:
            assert found is None, repr(reply)
        else:
            assert found is not None, repr(reply)
            assert (found.span(), found.span(1), found.string) == (expected.span(), expected.span(1), reply)


@pytest.mark.timeout(60)
def test_the_exact_sandboxs_match_does_not_backtrack_on_whitespace_floods() -> None:
    body = "x" + " \n" * 50_000 + "y"
    found = reference_match("```python\n" + body + "\n```")
    assert found is not None and found.group(1) == body
