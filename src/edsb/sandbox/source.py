"""The model's reply as the worker compiles it: the code block found in the reply, then the reference's textual
rewrite (docs/reference.md#code-execution). Pure functions; they run in the worker on every reply, and in the parent
wherever a report shows code.

The reference runs model code by textual surgery followed by `exec`. We keep the surgery (its side effects decide
verdicts: a helper whose name contains an API name stops compiling, a wrong entry signature fails on call, names
defined at top level are invisible inside the entry function) and replace the `exec` by the sandbox.
"""

from __future__ import annotations

import bisect
import re

from edsb.sandbox.code_api import API_FUNCTIONS

# --- extraction -------------------------------------------------------------------------------------------------------

_OPEN_FENCE = "```python"
_FENCE = "```"
_WHITESPACE_RUN = re.compile(r"\s+")


def extract_code(reply: str) -> str:
    """The code of a reply: the first ```` ```python ```` block, else the whole reply (prose included,
    docs/reference.md#code-extraction).

    A block opens with exactly ```` ```python ````, optional whitespace and a newline, and ends at the first later
    newline followed by optional whitespace and ```` ``` ````. The reference finds it with a lazy regular expression
    whose backtracking is quadratic on long whitespace runs; this scan gives the same answer in linear time, so the
    harness can call it on any reply.
    """
    block = code_block_span(reply)
    return reply if block is None else reply[block[1] : block[2]]


def code_block_span(text: str) -> tuple[int, int, int] | None:
    """Where the first python block of `text` is: the index of its opening fence, and the start and end of its
    body (see `extract_code`); None if there is none."""
    runs = {m.start(): m.end() for m in _WHITESPACE_RUN.finditer(text)}
    # Valid block ends: a newline whose whitespace run is followed by a fence.
    ends: list[int] = []
    for start, stop in runs.items():
        if text.startswith(_FENCE, stop):
            ends.extend(i for i in range(start, stop) if text[i] == "\n")
    ends.sort()
    position = text.find(_OPEN_FENCE)
    while position >= 0:
        after = position + len(_OPEN_FENCE)
        run_end = runs.get(after)
        if run_end is not None:
            newlines = [i for i in range(after, run_end) if text[i] == "\n"]
            # Greedy whitespace first: the body starts after the last newline of the run, then earlier ones.
            for newline in reversed(newlines):
                body_start = newline + 1
                k = bisect.bisect_left(ends, body_start + 1)  # the body holds at least one character
                if k < len(ends):
                    return position, body_start, ends[k]
        position = text.find(_OPEN_FENCE, position + 1)
    return None


# --- the rewrite ------------------------------------------------------------------------------------------------------

ENTRY_NAME = "parse_event"
ENTRY_HEADERS = ("def parse_event():", "def generate_next_plan():")
_ENTRY_METHOD_HEADER = "def parse_event(self):"
_REWRITE_PATTERN = re.compile(
    "|".join(re.escape(key) for key in sorted((*ENTRY_HEADERS, *API_FUNCTIONS), key=len, reverse=True))
)

#: How each sandbox's `self` exposes an API function: RestrictedPython refuses underscore attributes, so the restricted
#: sandbox's API object has them as `self.<name>`; the exact sandbox's executor has the reference's `self._<name>`.
RESTRICTED_PREFIX = "self."
EXACT_PREFIX = "self._"


def prepare_code(code: str, method_prefix: str = RESTRICTED_PREFIX) -> str:
    """The code as the reference executes it: exact entry headers become a method header, every API name (as a
    plain substring, comments and strings included, longest first) becomes `<method_prefix><name>`, and the result
    is stripped.

    The reference writes `self._<name>` (`EXACT_PREFIX`). The restricted sandbox's API object exposes the same
    functions without the underscore (`RESTRICTED_PREFIX`); the verdicts are the same: `my_get_character` becomes
    `my_self...` (a NameError), `def get_closest_object_2(...)` no longer compiles, and so on.
    """

    def replacement(match: re.Match[str]) -> str:
        found = match.group(0)
        return _ENTRY_METHOD_HEADER if found in ENTRY_HEADERS else method_prefix + found

    return _REWRITE_PATTERN.sub(replacement, code).strip()
