"""Text from a model or a server, made safe to keep: valid Unicode everywhere, and bounded where a record stores it.

JSON lets a reply spell a lone surrogate (`"\\ud800"`) and a Python string can hold one, but UTF-8 cannot: every
writer of edsb (results, transcripts, the response cache, the HTTP client) would fail on it. So each string is cleaned
once, where it enters (a reply, the JSON parsed from one, what model code handed back, an exception message): every
lone surrogate becomes U+FFFD, and `TextRepairs` notes where that happened and what a record had to cut, so the
result says so. Every helper here runs in linear time on any input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edsb.settings.limits import ERROR_CHARS, TEXT_CHARS

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")  # one code point per match: linear


def has_surrogates(text: str) -> bool:
    """Whether `text` holds a surrogate code point (which UTF-8 cannot encode)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def clean_text(text: str) -> str:
    """`text` with every surrogate code point replaced by U+FFFD (the same object when there is none)."""
    return _SURROGATE.sub(REPLACEMENT, text) if has_surrogates(text) else text


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a marker saying how much was dropped (unchanged when it fits)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def map_strings(value: Any, change: Callable[[str], str]) -> tuple[Any, bool]:
    """Apply `change` to every string of a JSON-like value (dict keys included), in place where it can; returns
    the value and whether any string changed (`change` returns its argument itself when it has nothing to do).
    Iterative, so data nested as deep as a parser allows is no problem."""
    if isinstance(value, str):
        changed = change(value)
        return changed, changed is not value
    any_changed = False
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(isinstance(key, str) and change(key) is not key for key in node):
                items = [(change(k) if isinstance(k, str) else k, v) for k, v in node.items()]
                node.clear()
                node.update(items)
                any_changed = True
            slots: Any = node.items()
        elif isinstance(node, list):
            slots = enumerate(node)
        else:
            continue
        for slot, item in slots:  # assigning to an existing key or index is safe while iterating
            if isinstance(item, str):
                new = change(item)
                if new is not item:
                    node[slot] = new
                    any_changed = True
            elif isinstance(item, list | dict):
                stack.append(item)
            elif isinstance(item, tuple):
                items, tuple_changed = map_strings(list(item), change)
                if tuple_changed:
                    node[slot] = tuple(items)
                    any_changed = True
    return value, any_changed


@dataclass
class TextRepairs:
    """What one run had to repair in the text it keeps: where lone surrogates were replaced, which fields were cut."""

    surrogates: set[str] = field(default_factory=set)
    truncated: set[str] = field(default_factory=set)

    def text(self, text: str, where: str) -> str:
        cleaned = clean_text(text)
        if cleaned is not text:
            self.surrogates.add(where)
        return cleaned

    def json(self, value: Any, where: str) -> Any:
        """A parsed JSON value (or plain data) with every string cleaned, in place."""
        cleaned, changed = map_strings(value, clean_text)
        if changed:
            self.surrogates.add(where)
        return cleaned

    def bounded(self, text: str, limit: int, where: str) -> str:
        cut = truncate(text, limit)
        if cut is not text:
            self.truncated.add(where)
        return cut

    def bounded_json(self, value: Any, limit: int, where: str) -> Any:
        """Plain data with every string longer than `limit` cut, in place."""
        cut, changed = map_strings(value, lambda text: truncate(text, limit))
        if changed:
            self.truncated.add(where)
        return cut


@dataclass(frozen=True)
class TextLimits:
    """How much model-sent text one result keeps (the transcript keeps the replies whole)."""

    error_chars: int = ERROR_CHARS  # an error message: `<kind>: <message>`
    text_chars: int = TEXT_CHARS  # each string taken from a reply: the activity, a plan string, a failure reason
