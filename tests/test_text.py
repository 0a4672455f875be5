"""`edsb.text`: lone surrogates replaced, strings bounded, JSON-like data walked without recursion."""

from __future__ import annotations

from typing import Any

from edsb.text import REPLACEMENT, TextRepairs, clean_text, has_surrogates, map_strings, truncate


def test_every_surrogate_code_point_is_replaced_and_nothing_else_changes() -> None:
    text = "a\ud800b\udbff\udc00c\udfff" + "é\U0001f600\ufffe\x00"
    assert has_surrogates(text)
    cleaned = clean_text(text)
    assert cleaned == f"a{REPLACEMENT}b{REPLACEMENT}{REPLACEMENT}c{REPLACEMENT}é\U0001f600\ufffe\x00"
    assert not has_surrogates(cleaned)
    cleaned.encode("utf-8")  # strict


def test_clean_text_returns_the_same_object_when_there_is_nothing_to_do() -> None:
    for text in ("plain ascii", "é\U0001f600", ""):
        assert clean_text(text) is text
        assert not has_surrogates(text)


def test_truncate_says_how_much_it_dropped() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("x" * 10_005, 5) == "xxxxx… [10,000 more characters]"


def test_map_strings_reaches_keys_values_and_tuples_in_place() -> None:
    data: dict[str, Any] = {"\ud800k": ["\udfff", ("\udc00", 1)], "n": 1.5, "ok": "fine"}
    cleaned, changed = map_strings(data, clean_text)
    assert changed and cleaned is data
    assert data == {"\ufffdk": ["\ufffd", ("\ufffd", 1)], "n": 1.5, "ok": "fine"}
    assert list(data) == ["\ufffdk", "n", "ok"]  # key order kept
    assert map_strings({"a": [1, None, True]}, clean_text) == ({"a": [1, None, True]}, False)
    assert map_strings("\ud800", clean_text) == ("\ufffd", True)


def test_map_strings_walks_data_as_deep_as_a_parser_allows() -> None:
    nested: list[Any] = ["\ud800"]
    for _ in range(200_000):
        nested = [nested]
    cleaned, changed = map_strings(nested, clean_text)
    assert changed
    while isinstance(cleaned, list) and cleaned and isinstance(cleaned[0], list):
        cleaned = cleaned[0]
    assert cleaned == ["\ufffd"]


def test_repairs_note_where_text_was_repaired_or_cut() -> None:
    repairs = TextRepairs()
    assert repairs.text("fine", "narrator") == "fine"
    assert repairs.text("\ud800", "event_parser") == "\ufffd"
    assert repairs.json({"a": ["\udfff"]}, "code") == {"a": ["\ufffd"]}
    assert repairs.bounded("short", 10, "error") == "short"
    assert repairs.bounded("x" * 20, 10, "reason") == "x" * 10 + "… [10 more characters]"
    assert repairs.bounded_json({"David": {"r": ["y" * 12]}}, 10, "plan") == {
        "David": {"r": ["y" * 10 + "… [2 more characters]"]}
    }
    assert repairs.surrogates == {"event_parser", "code"}
    assert repairs.truncated == {"reason", "plan"}
