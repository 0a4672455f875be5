"""Reading the Narrator's JSON reply into the next event, as the reference does (docs/reference.md#narrator-reply).

Three outcomes: an event of kept characters, a skip (`None`: the model proposes no event, the plan is `{}`), or a
`RunError` whose `kind` says why the reply is unusable.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edsb.errors import json_error_message
from edsb.results import ErrorKind, RunError
from edsb.text import TextRepairs

# Whitespace then `(`: a fixed two-character pattern, no quantifier, so a search is linear.
_OPENING = re.compile(r"\s\(")
# How much of a value the model sent an error message shows (the message is bounded again where it is stored).
_SHOWN = reprlib.Repr()
_SHOWN.maxlist = _SHOWN.maxdict = 12
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 80


class NarratorFormatError(RunError):
    """The reply is not JSON, not an object, or its event lacks a usable `activity` / `characters`."""

    kind = ErrorKind.NARRATOR_FORMAT  # the model's: its reply is what cannot be read


class NarratorNoCharacterError(RunError):
    """The event names none of the kept characters."""

    kind = ErrorKind.NARRATOR_NO_CHARACTER  # the model's: its event names no one who can act


@dataclass(frozen=True)
class NarratorEvent:
    characters: tuple[str, ...]  # kept characters, in `current_states` order
    activity: str
    reasoning: str | None = None

    @property
    def label(self) -> str:
        """`[Ann, Bob] chat at table_1`: how the Event Parser's query shows the event."""
        return event_label(self.characters, self.activity)


def event_label(characters: Sequence[str], activity: str) -> str:
    """`[Ann, Bob] chat at table_1`: how both prompts show an event (history entries and the Narrator's event)."""
    return f"[{', '.join(characters)}] {activity}"


def normalise_activity(activity: str) -> str:
    """Activities are compared and shown without trailing periods, wherever they come from."""
    return activity.rstrip(".")


def make_event(characters: Sequence[str], activity: str, reasoning: str | None = None) -> NarratorEvent:
    """An event with the activity normalised as every event is (trailing periods dropped)."""
    return NarratorEvent(tuple(characters), normalise_activity(activity), reasoning)


def clean_activity(activity: str) -> str:
    """Drop square brackets and a final ` (...)` group (a state the model echoed from the history)."""
    return drop_trailing_group(activity.replace("[", "").replace("]", ""))


def drop_trailing_group(text: str) -> str:
    """`text` without its final parenthesised group: what `re.sub(r"\\s\\(.*?\\)$", "", text)` does (the reference's
    cleaning), in linear time; that regex backtracks quadratically on a long run of ` (` (a 120 KB activity took
    49 s, on the event loop).

    The regex removes one span at most: it must end at `$` (the end, or before a final newline) just after a `)`,
    and `.` crosses no newline, so the span starts at the leftmost whitespace + `(` after the last earlier newline.
    """
    if text.endswith(")"):
        end = len(text)
    elif text.endswith(")\n"):
        end = len(text) - 1
    else:
        return text
    closing = end - 1  # the `)`; the group's content lies between the `(` and it, free of newlines
    first = max(text.rfind("\n", 0, closing), 0)  # the whitespace itself may be that newline
    opening = _OPENING.search(text, first, closing)
    return text if opening is None else text[: opening.start()] + text[end:]


def _named(name: str, characters: Any) -> bool:
    """Python's `in`: list membership, or a substring test when the model wrote the names as one string."""
    try:
        return name in characters
    except TypeError:
        raise NarratorFormatError(f"event characters must be a list of names, got {_SHOWN.repr(characters)}") from None


def _read_json(reply: str) -> Any:
    """The JSON value of a reply, or NarratorFormatError for everything `json.loads` can raise on it: malformed
    JSON, nesting too deep to decode, a number with more digits than Python converts (a plain ValueError)."""
    try:
        return json.loads(reply)
    except json.JSONDecodeError as exc:
        raise NarratorFormatError(f"reply is not valid JSON ({json_error_message(exc)})") from None
    except RecursionError:
        raise NarratorFormatError("reply is JSON nested too deeply to read") from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise NarratorFormatError(f"reply is JSON that cannot be read ({str(exc)[:200]})") from None


def parse_narrator_reply(
    reply: str, character_names: Sequence[str], repairs: TextRepairs | None = None
) -> NarratorEvent | None:
    """The event proposed by `reply`, None for a skip; `character_names` are the kept characters in case order.
    Strings of the parsed JSON are made valid Unicode (noted in `repairs` as `event`): JSON can spell a lone
    surrogate even when the reply text holds none."""
    data = (repairs or TextRepairs()).json(_read_json(reply), "event")
    if not isinstance(data, dict):
        raise NarratorFormatError(f"reply must be a JSON object, got {type(data).__name__}")
    event = data.get("event")
    if not event:
        return None
    if not isinstance(event, dict):
        raise NarratorFormatError(f"`event` must be an object, got {type(event).__name__}")
    if "activity" not in event:
        raise NarratorFormatError("event has no `activity`")
    activity = event["activity"]
    if not isinstance(activity, str):
        raise NarratorFormatError(f"`activity` must be a string, got {type(activity).__name__}")
    activity = clean_activity(activity)
    if "characters" not in event:
        raise NarratorFormatError("event has no `characters`")
    listed = event["characters"]
    if not listed:
        return None
    names = [name for name in character_names if _named(name, listed)]
    if not names:
        raise NarratorNoCharacterError(f"no kept character in the event's characters {_SHOWN.repr(listed)}")
    reasoning = data.get("reasoning")
    return make_event(names, activity, reasoning if isinstance(reasoning, str) else None)
