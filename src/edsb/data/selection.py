"""The case-selection syntax shared by every command: ids, ranges and tags, comma-separated (`0-4,60`, `OA,RC`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from edsb.data.models import TAGS, TestCase
from edsb.errors import UsageError, hint

_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")


def describe_ids(ids: Iterable[int]) -> str:
    """Compact `0-4, 10-14, 60` form of a set of ids, for error messages."""
    ordered = sorted(set(ids))
    spans: list[str] = []
    start = prev = None
    for value in [*ordered, None]:
        if value is not None and prev is not None and value == prev + 1:
            prev = value
            continue
        if start is not None:
            spans.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = value
    return ", ".join(spans)


def require_case(case_id: int, cases: Iterable[int]) -> int:
    """`case_id` if the benchmark has it, else the usage error that lists the valid ids (numbers are not typos to
    guess at: the compact list is the help)."""
    if case_id not in set(cases):
        raise UsageError(f"unknown case id {case_id}{hint(None, f'valid ids: {describe_ids(cases)}')}")
    return case_id


Selection = str | int | Iterable[int] | None


def selection_text(value: Selection) -> str | None:
    """A selection given as a number or a list (a config file's `cases = [13, 60]`, Inspect's `-T cases=13`) in the
    selection syntax; text and None pass through."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    return ",".join(str(item) for item in value)


def _tokens(selection: str, what: str) -> list[str]:
    """The comma-separated items of a selection. An empty selection or an empty item (`13,,60`) is refused: it is
    a typo or an unset shell variable, and silently reading it as "everything" or skipping it would run another
    sweep than the one meant."""
    tokens = [raw.strip() for raw in selection.split(",")]
    if not selection.strip():
        raise UsageError(f"empty {what} selection (leave the option out for the default)")
    if "" in tokens:
        raise UsageError(f"empty item in {what} selection {selection!r}")
    return tokens


def select_cases(selection: str | None, cases: Mapping[int, TestCase]) -> list[int]:
    """Ids picked by a selection string, ascending; None or `all` picks every case."""
    if selection is None or selection.strip().lower() == "all":
        return sorted(cases)
    chosen: set[int] = set()
    for token in _tokens(selection, "case"):
        upper = token.upper()
        if upper in TAGS:
            chosen.update(cid for cid, case in cases.items() if upper in case.tags)
            continue
        if token.lower() == "all":
            chosen.update(cases)
            continue
        span = _RANGE.match(token)
        if span:
            low, high = int(span.group(1)), int(span.group(2))
            if low > high:
                raise UsageError(f"empty case range {token!r}")
            picked = [cid for cid in cases if low <= cid <= high]
            if not picked:
                raise UsageError(f"case range {token!r} matches no case (valid ids: {describe_ids(cases)})")
            chosen.update(picked)
            continue
        if token.isdigit():
            chosen.add(require_case(int(token), cases))
            continue
        raise UsageError(f"unknown case selector {token!r} (use ids, ranges like 0-4, or tags {', '.join(TAGS)})")
    if not chosen:
        raise UsageError(f"case selection {selection!r} selects nothing")
    return sorted(chosen)


def parse_levels(text: str | None, default: Iterable[int] = (0, 1, 2)) -> list[int]:
    """Distraction levels such as `0-2` or `0,2`."""
    if text is None:
        return sorted(set(default))
    levels: set[int] = set()
    for token in _tokens(text, "distraction level"):
        span = _RANGE.match(token)
        if span:
            low, high = int(span.group(1)), int(span.group(2))
            if low > high:
                raise UsageError(f"empty distraction range {token!r}")
            levels.update(range(low, high + 1))
        elif token.isdigit():
            levels.add(int(token))
        else:
            raise UsageError(f"distraction levels must be integers or ranges like 0-2, got {token!r}")
    bad = sorted(level for level in levels if level > 2)
    if bad:
        raise UsageError(f"distraction level {bad[0]} does not exist (levels are 0, 1 and 2)")
    return sorted(levels)
