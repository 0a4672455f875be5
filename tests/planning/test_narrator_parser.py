"""The Narrator reply parser (docs/reference.md#narrator-reply): events, skips and the two error kinds."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from edsb.planning.narrator import (
    NarratorFormatError,
    NarratorNoCharacterError,
    clean_activity,
    drop_trailing_group,
    make_event,
    parse_narrator_reply,
)
from edsb.results import RunError
from edsb.text import TextRepairs

KEPT = ["Ann", "Bob", "Cid"]


def reply(event: object, reasoning: str | None = "because") -> str:
    body: dict[str, object] = {"event": event}
    if reasoning is not None:
        body["reasoning"] = reasoning
    return json.dumps(body)


def test_event_characters_follow_case_order_not_reply_order() -> None:
    event = parse_narrator_reply(reply({"characters": ["Cid", "Ann"], "activity": "chat at table_1"}), KEPT)
    assert event is not None
    assert event.characters == ("Ann", "Cid")
    assert event.activity == "chat at table_1"
    assert event.reasoning == "because"
    assert event.label == "[Ann, Cid] chat at table_1"


def test_names_outside_the_cast_are_dropped() -> None:
    event = parse_narrator_reply(reply({"characters": ["Bob", "Zed"], "activity": "wave"}), KEPT)
    assert event is not None and event.characters == ("Bob",)


def test_a_string_of_names_matches_by_substring() -> None:
    event = parse_narrator_reply(reply({"characters": "Cid and Bob", "activity": "wave"}), KEPT)
    assert event is not None and event.characters == ("Bob", "Cid")
    # The reference's `in` test: "Annabel" contains "Ann".
    event = parse_narrator_reply(reply({"characters": "Annabel", "activity": "wave"}), KEPT)
    assert event is not None and event.characters == ("Ann",)


def test_list_membership_is_exact() -> None:
    with pytest.raises(NarratorNoCharacterError):
        parse_narrator_reply(reply({"characters": ["Annabel"], "activity": "wave"}), KEPT)


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("[Ann] sits on the sofa (ongoing)", "Ann sits on the sofa"),
        ("drinks coffee.", "drinks coffee"),
        ("sits (quietly) on the sofa", "sits (quietly) on the sofa"),
        ("walks (slowly) to the door (completed)", "walks"),  # leftmost ` (` whose line ends with `)`
        ("chat(ongoing)", "chat(ongoing)"),  # the group must follow whitespace
        ("read a book (looping).", "read a book (looping)"),  # periods go after the group test
    ],
)
def test_activity_cleaning(raw: str, cleaned: str) -> None:
    event = parse_narrator_reply(reply({"characters": ["Ann"], "activity": raw}), KEPT)
    assert event is not None and event.activity == cleaned


def test_clean_activity_keeps_periods_and_make_event_drops_them() -> None:
    assert clean_activity("[a] b (x)") == "a b"
    assert clean_activity("eat...") == "eat..."
    assert make_event(["Ann"], "eat...").activity == "eat"


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({}),
        json.dumps({"reasoning": "wait"}),
        reply(None),
        reply({}),
        reply(""),
        reply({"characters": [], "activity": "nothing"}),
        reply({"characters": "", "activity": "nothing"}),
    ],
)
def test_skips(text: str) -> None:
    assert parse_narrator_reply(text, KEPT) is None


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '```json\n{"event": null}\n```',
        "[1, 2]",
        '"event"',
        reply("Ann waves"),
        reply(["Ann"]),
        reply({"characters": ["Ann"]}),  # no activity
        reply({"characters": []}),  # activity is read before the empty-characters skip
        reply({"activity": "wave"}),  # no characters
        reply({"characters": ["Ann"], "activity": None}),
        reply({"characters": 3, "activity": "wave"}),
    ],
)
def test_format_errors(text: str) -> None:
    with pytest.raises(NarratorFormatError) as caught:
        parse_narrator_reply(text, KEPT)
    assert caught.value.kind == "narrator_format"
    assert isinstance(caught.value, RunError)


def test_no_kept_character_is_its_own_error_kind() -> None:
    with pytest.raises(NarratorNoCharacterError) as caught:
        parse_narrator_reply(reply({"characters": ["Zed"], "activity": "wave"}), KEPT)
    assert caught.value.kind == "narrator_no_character"
    assert "Zed" in str(caught.value)


def test_reasoning_is_optional() -> None:
    event = parse_narrator_reply(reply({"characters": ["Ann"], "activity": "wave"}, reasoning=None), KEPT)
    assert event is not None and event.reasoning is None


def test_an_unterminated_string_says_where_in_plain_words() -> None:
    with pytest.raises(NarratorFormatError) as caught:
        parse_narrator_reply('{"event":\n "unfinished', KEPT)
    message = str(caught.value)
    assert "Unterminated string starting at: line 2 column 2" in message
    assert "at at" not in message


# --- hostile replies ---------------------------------------------------------------------------------------------

_REFERENCE_GROUP = re.compile(r"\s\(.*?\)$")  # the reference's cleaning: the oracle of the linear scan


def test_the_trailing_group_scan_answers_as_the_reference_regex_on_every_short_string() -> None:
    """Every string of up to 7 characters over the characters that matter (and an ideographic space)."""
    alphabet = [" ", "(", ")", "\n", "x", "\u3000", "\t"]
    for length in range(8):
        for chars in itertools.product(alphabet, repeat=length):
            text = "".join(chars)
            assert drop_trailing_group(text) == _REFERENCE_GROUP.sub("", text), repr(text)


def test_the_trailing_group_scan_treats_every_whitespace_character_as_the_regex_does() -> None:
    for point in range(0x110000):
        if 0xD800 <= point < 0xE000:
            continue
        text = f"a{chr(point)}(b)"
        assert drop_trailing_group(text) == _REFERENCE_GROUP.sub("", text), hex(point)


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("Ryan texts" + " (" * 60_000 + "x", "Ryan texts" + " (" * 60_000 + "x"),  # the 49 s activity: no final group
        ("Ryan texts" + " (" * 60_000 + "x)", "Ryan texts"),
        ("a(" * 100_000 + ")", "a(" * 100_000 + ")"),  # no whitespace before any `(`
        ("go" + " (\n" * 50_000 + " (x)", "go" + " (\n" * 50_000),
        ("go" + " (" * 50_000 + "x)\n", "go\n"),
        ("\t(" * 70_000 + ")", ""),
    ],
    ids=["unclosed", "closed", "no-space", "newlines", "final-newline", "tabs"],
)
def test_long_adversarial_activities_are_cleaned_as_the_reference_would(text: str, cleaned: str) -> None:
    assert drop_trailing_group(text) == cleaned
    short = text[:3000] + text[-3000:]  # the regex itself only on a size it handles in reasonable time
    assert drop_trailing_group(short) == _REFERENCE_GROUP.sub("", short)


def test_the_narrator_runs_no_regex_with_a_quantifier_on_model_text() -> None:
    import edsb.planning.narrator as narrator

    patterns = [value.pattern for value in vars(narrator).values() if isinstance(value, re.Pattern)]
    assert patterns == [r"\s\("]


@pytest.mark.parametrize(
    ("number", "message"),
    [
        (
            "7" * 5001,
            "reply is JSON that cannot be read (Exceeds the limit (4300 digits) for integer string conversion",
        ),
        ("-" + "1" * 10_000, "reply is JSON that cannot be read (Exceeds the limit (4300 digits)"),
    ],
)
def test_a_number_too_long_to_convert_is_a_format_error(number: str, message: str) -> None:
    text = reply({"characters": ["Ann"], "activity": "wave"})[:-1] + f', "n": {number}}}'
    with pytest.raises(NarratorFormatError) as error:
        parse_narrator_reply(text, KEPT)
    assert str(error.value).startswith(message)
    assert len(str(error.value)) < 300


def test_numbers_python_can_read_are_fine() -> None:
    text = reply({"characters": ["Ann"], "activity": "wave"})[:-1] + ', "n": [' + "9" * 4300 + ", 1e999999]}"
    assert parse_narrator_reply(text, KEPT) == make_event(["Ann"], "wave", "because")


def test_lone_surrogates_in_the_json_are_replaced_and_noted() -> None:
    repairs = TextRepairs()
    text = '{"reasoning": "\\ud800", "\\udfff": 1, "event": {"characters": ["Ann", "\\udc00"], "activity": "w\\ud800"}}'
    event = parse_narrator_reply(text, KEPT, repairs)
    assert event == make_event(["Ann"], "w\ufffd", "\ufffd")
    assert repairs.surrogates == {"event"}
    clean = TextRepairs()
    assert parse_narrator_reply(reply({"characters": ["Ann"], "activity": "\\ud83d\\ude00"}), KEPT, clean)
    assert clean.surrogates == set()


def test_messages_quote_a_bounded_part_of_what_the_model_sent() -> None:
    names = [f"name{i}" for i in range(200_001)]
    with pytest.raises(NarratorNoCharacterError) as error:
        parse_narrator_reply(reply({"characters": names, "activity": "wave"}), KEPT)
    assert str(error.value).startswith("no kept character in the event's characters ['name0', 'name1', ")
    assert len(str(error.value)) < 300
    with pytest.raises(NarratorFormatError) as error:
        parse_narrator_reply(reply({"characters": 10**4000, "activity": "wave"}), KEPT)
    assert len(str(error.value)) < 300
