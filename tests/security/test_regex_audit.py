"""Every regular expression in edsb, audited: none with nested or overlapping quantifiers runs on text a
model sent, since backtracking on a hostile reply would stall the event loop (the Narrator's trailing-group regex
took 49 s on a 120 KB activity). A new pattern fails this test until it is added here with what it reads."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "edsb"
_RE_FUNCTIONS = {"compile", "sub", "subn", "search", "match", "fullmatch", "findall", "finditer", "split"}

AUDITED = {
    # Model text, linear: one quantifier over a character class, or an alternation of literals.
    ("sandbox/source.py", r"\s+"): "reply text (the code block scan): a single class, linear",
    ("text.py", "[\ud800-\udfff]"): "any text: one code point per match",
    ("planning/narrator.py", r"\s\("): "the Narrator's activity: two fixed characters, no quantifier",
    # A server's text (as hostile as a model's: the endpoint is the model's), linear.
    ("llm/retry.py", r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+"): "a rate-limit reset header, fullmatch only: every part "
    "ends in a unit letter, so backtracking crosses each part once",
    ("llm/retry.py", r"(\d+(?:\.\d+)?)(ms|h|m|s)"): "the parts of a reset header the pattern above matched whole "
    "(alone, `findall` restarted at each digit of a flood: quadratic)",
    ("llm/providers/google.py", r"(\d+(?:\.\d+)?)s"): "Gemini's retryDelay in an error body, fullmatch only: one start",
    ("llm/refusals.py", r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"): "the words of a refusal's message "
    "(finditer): each dotted part starts with its dot, so a match is one pass and the scan goes on after it "
    "(200 KB floods in 21 ms)",
    ("llm/refusals.py", r"(?<=[a-z0-9])(?=[A-Z])"): "a parameter name a server named: zero-width, one look each side",
    ("llm/refusals.py", r"[.\[\]]+"): "a parameter path a server named (split): a single class, linear",
    # Not model text.
    ("llm/transcripts.py", r"[A-Za-z0-9][A-Za-z0-9._-]*"): "run ids edsb makes",
    ("llm/oracle/model.py", r"\[(?P<title>[^\]\n]+)\]\n(?P<body>.*?)(?=\n\n\[[^\]\n]+\]\n|\Z)"): "edsb's prompts",
    ("llm/oracle/model.py", r"^\[(?P<names>[^\]]*)\] (?P<activity>.*)$"): "the oracle's own event label",
    ("data/selection.py", r"^(\d+)\s*-\s*(\d+)$"): "the user's --cases",
    (
        "llm/providers/anthropic.py",
        r"claude-(?P<family>opus|sonnet|haiku|fable|mythos)-(?P<major>\d+)(?:-(?P<minor>\d{1,2})(?!\d))?(?:-\d{8})?",
    ): "the user's --model",
    ("llm/providers/anthropic.py", r"^(?:[a-z]{2,6}\.)?anthropic\.|-v\d+(?::\d+)?$|@\d{8}$"): "a cloud's name for a "
    "Claude model (the user's --model, priced): each alternative anchored or bounded by its literal head",
    ("scoring/conditions.py", r"(\|\||&&|[()])"): "the benchmark's expected conditions",
}
# Patterns built at import time from edsb's own names: an alternation of escaped literals (the API names).
BUILT = {
    (
        "sandbox/source.py",
        "re.compile('|'.join((re.escape(key) for key in "
        "sorted((*ENTRY_HEADERS, *API_FUNCTIONS), key=len, reverse=True))))",
    ),
    # The exact sandbox's `match` local: the reference's pattern with the body's length fixed, matched once at the
    # block that the linear scan (`code_block_span`) already found; linear on whitespace floods (test_source.py).
    ("sandbox/exact.py", "re.compile(_OPENING + body + _CLOSING)"),
    # --perturb: whole-word renaming of the benchmark's own texts (cases, descriptions), never model text.
    ("data/perturb.py", "re.compile('\\\\b(?:' + '|'.join(map(re.escape, keys)) + ')\\\\b')"),
}


def _patterns() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    literal, built = set(), set()
    for path in SRC.rglob("*.py"):
        name = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
                continue
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "re"):
                continue
            if node.func.attr not in _RE_FUNCTIONS:
                continue
            pattern = node.args[0]
            if isinstance(pattern, ast.Constant) and isinstance(pattern.value, str):
                literal.add((name, pattern.value))
            else:
                built.add((name, ast.unparse(node)))
    return literal, built


def test_every_regex_in_edsb_is_audited() -> None:
    literal, built = _patterns()
    assert literal == set(AUDITED)
    assert built == BUILT
