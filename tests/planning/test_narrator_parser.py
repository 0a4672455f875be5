"""The Narrator reply parser (benchmark-protocol §3.3): events, skips and the two error kinds."""

from __future__ import annotations

import json

import pytest

from edsb.planning.narrator import (
    NarratorFormatError,
    NarratorNoCharacterError,
    clean_activity,
    make_event,
    parse_narrator_reply,
)
from edsb.results import RunError

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
