"""Replies that attack the harness's parsers, sizes and Unicode handling rather than the sandbox, delivered
through the real pipeline of one `edsb run` process: loopback model, real sandbox workers, real judge, real store.

Every attack run is followed by a benign run that must pass exactly as a clean run does, so each attack is also
checked for leaving nothing behind. The regression tests of the reported findings (`REGRESSIONS`) and our own attacks
in the families parser complexity, unbounded sizes and invalid Unicode (`ATTACKS`) share one invocation; each asserts
the exact recorded outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from edsb.text import has_surrogates
from tests.support.data import require_data
from tests.support.edsb_cli import Outcome, child_env, edsb_child
from tests.support.hostile_script import (
    BENIGN_PLAN,
    BENIGN_PROGRAM,
    RunScript,
    ScriptedRun,
    narrator_json,
    runs_by_name,
)
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results, transcript_records
from tests.support.scripted_programs import BENIGN_BODY, program, run_args

SIT = "get_character('David').set_position(get_area_to_sit_on('chair_2'))\n"
EAT = "get_character('David').set_target_action('eat')\n"
PATHOLOGICAL = "Ryan texts" + " (" * 60000 + "x"  # the reported activity: 49 s of regex backtracking


@dataclass(frozen=True)
class Attack:
    name: str
    narrator: str | None = None  # None: a valid reply carrying the name
    program: str = BENIGN_PROGRAM
    status: str = "passed"
    kind: str | None = None
    error: str | Callable[[str], bool] | None = None  # the exact message, or a check of it
    surrogates: tuple[str, ...] = ()  # the record's `surrogates_replaced`
    truncated: tuple[str, ...] = ()
    check: Callable[[dict[str, Any]], Any] = lambda record: None  # further asserts on the record
    model: str = "test-model"
    extra: dict[str, Any] = field(default_factory=dict)

    def run(self) -> ScriptedRun:
        narrator = self.narrator if self.narrator is not None else narrator_json(self.name)
        return ScriptedRun(self.name, narrator, self.program, self.model)


def code(name: str, body: str) -> str:
    return program(name, body)


def activity_is(expected: str) -> Callable[[dict[str, Any]], None]:
    def check(record: dict[str, Any]) -> None:
        assert record["event"] == {"characters": ["David"], "activity": expected}

    return check


def plan_is(expected: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def check(record: dict[str, Any]) -> None:
        assert record["plan"] == expected

    return check


def many_characters(count: int) -> str:
    lines = [f"get_character('extra_{i}').set_target_action('eat')" for i in range(count - 1)]
    return "\n".join(lines) + "\n" + EAT + SIT


# --- the reported findings, each through the real pipeline -----------------------------------------------------------

REGRESSIONS = [
    # Lone surrogates, one way in each: a target action, a relationship, an exception message, Narrator JSON fields.
    Attack(
        "surrogate_action",
        program=code("surrogate_action", "get_character('David').set_target_action('\\ud800eat')\n" + SIT),
        status="error",
        kind="unknown_action",
        error=lambda message: message.startswith("unknown_action: ") and "\ufffdeat" in message,
        surrogates=("code",),
        check=plan_is({"David": {"target_action": ["\ufffdeat", "sit"], "relationships": ["sit on chair_2"]}}),
    ),
    Attack(
        "surrogate_relationship",
        program=code("surrogate_relationship", EAT + "get_character('David').set_position(['\\udfffnear chair_1'])\n"),
        status="error",
        kind="unknown_relationship",
        error=lambda message: message.startswith("unknown_relationship: ") and "\ufffdnear chair_1" in message,
        surrogates=("code",),
        check=plan_is({"David": {"target_action": ["eat"], "relationships": ["\ufffdnear chair_1"]}}),
    ),
    Attack(
        "surrogate_exception",
        program=code("surrogate_exception", "raise ValueError('\\ud800 boom \\udc00')\n"),
        status="error",
        kind="code_runtime",
        error="code_runtime: ValueError: \ufffd boom \ufffd",
        surrogates=("code",),
    ),
    Attack(
        "surrogate_narrator_json",
        narrator='{"marker": "surrogate_narrator_json", "reasoning": "\\ud800", '
        '"event": {"characters": ["David", "\\udfff"], "activity": "eat\\udbff a sandwich"}}',
        surrogates=("event",),
        check=activity_is("eat\ufffd a sandwich"),
    ),
    # A 5,001-digit number: json.loads raises a plain ValueError.
    Attack(
        "narrator_huge_integer",
        narrator=narrator_json("narrator_huge_integer")[:-1] + ', "n": ' + "7" * 5001 + "}",
        status="error",
        kind="narrator_format",
        error=lambda message: message.startswith(
            "narrator_format: reply is JSON that cannot be read (Exceeds the limit (4300 digits) for integer string"
        ),
    ),
    # The trailing-group regex was quadratic; the activity has no final group, so it is kept (and cut when stored).
    Attack(
        "narrator_pathological_activity",
        narrator=narrator_json("narrator_pathological_activity", PATHOLOGICAL),
        truncated=("event",),
        check=activity_is(PATHOLOGICAL[:2000] + f"… [{len(PATHOLOGICAL) - 2000:,} more characters]"),
    ),
    # 200,001 names, none kept: the message used to repeat the whole list (a 1.4 MB line).
    Attack(
        "narrator_200001_names",
        narrator=json.dumps(
            {
                "reasoning": "narrator_200001_names",
                "event": {"characters": [f"name{i}" for i in range(200_001)], "activity": "eat"},
            }
        ),
        status="error",
        kind="narrator_no_character",
        error=lambda message: (
            message.startswith("narrator_no_character: no kept character in the event's characters ['name0', 'name1', ")
            and len(message) < 300
        ),
    ),
]

# --- our own attacks -------------------------------------------------------------------------------------------------

PARSER_COMPLEXITY = [
    Attack(
        "trailing_group_closed",
        narrator=narrator_json("trailing_group_closed", PATHOLOGICAL + ")"),
        check=activity_is("Ryan texts"),  # the leftmost ` (` opens the final group: everything after it goes
    ),
    Attack(
        "trailing_group_newlines",
        narrator=narrator_json("trailing_group_newlines", "eat (now)\n (later)" + "\n (" * 500 + "x)"),
        check=activity_is("eat (now)\n (later)" + "\n (" * 499 + "\n"),  # `.` stops at a newline
    ),
    Attack(
        "bracket_flood",
        narrator=narrator_json("bracket_flood", "[" * 100_000 + "eat" + "]" * 100_000),
        check=activity_is("eat"),
    ),
    Attack(
        "format_string_activity",  # the query is built with f-strings: the activity is data, never a template
        narrator=narrator_json("format_string_activity", "eat {0.__class__} {x} %s {{ }} {{{{"),
        check=activity_is("eat {0.__class__} {x} %s {{ }} {{{{"),
    ),
    Attack(
        "narrator_deep_nesting",
        narrator=narrator_json("narrator_deep_nesting")[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        status="error",
        kind="narrator_format",
        error="narrator_format: reply is JSON nested too deeply to read",
    ),
    Attack("integer_at_the_limit", narrator=narrator_json("integer_at_the_limit")[:-1] + ', "n": ' + "9" * 4300 + "}"),
    Attack(
        "float_overflow",
        narrator=narrator_json("float_overflow")[:-1] + ', "n": [1e999999999, -1e999999999, 1e-999999999]}',
    ),
    Attack(
        "code_fence_flood",
        program="```python\n" * 50_000,
        status="error",
        kind="code_syntax",
        error=lambda message: message.startswith("code_syntax: "),
    ),
    Attack(
        "whitespace_after_fence",
        program="```python"
        + " \t" * 100_000
        + "\n# program: whitespace\ndef parse_event():\n"
        + "".join(f"    {line}\n" for line in BENIGN_BODY.splitlines())
        + "```\n",
        check=plan_is(BENIGN_PLAN),
    ),
    Attack(
        "api_name_flood",
        program=code("api_name_flood", "# " + "get_character" * 100_000 + "\n" + BENIGN_BODY),
        check=plan_is(BENIGN_PLAN),
    ),
]

UNBOUNDED_SIZES = [
    Attack(
        "plan_65_characters",
        program=code("plan_65_characters", many_characters(65)),
        status="error",
        kind="code_output",
        error="code_output: the plan sets 65 characters; the limit is 64 (--max-plan-characters)",
    ),
    Attack("plan_64_characters", program=code("plan_64_characters", many_characters(64))),
    Attack(
        "plan_65_relationships",
        program=code(
            "plan_65_relationships",
            EAT + "get_character('David').set_position(['sit on chair_2'] + ['near chair_1'] * 64)\n",
        ),
        status="error",
        kind="code_output",
        error="code_output: the plan gives 65 relationships to one character; the limit is 64 "
        "(--max-plan-relationships)",
    ),
    Attack(
        "plan_long_string",
        program=code("plan_long_string", "get_character('David').set_target_action('e' * 1001)\n" + SIT),
        status="error",
        kind="code_output",
        error="code_output: the plan holds a string of 1,001 characters; the limit is 1,000 (--max-plan-string-chars)",
    ),
    Attack(
        "plan_long_character_name",
        program=code("plan_long_character_name", "get_character('D' * 1001).set_target_action('eat')\n" + EAT + SIT),
        status="error",
        kind="code_output",
        error="code_output: the plan names a character of 1,001 characters; the limit is 1,000 "
        "(--max-plan-string-chars)",
    ),
    Attack(
        "long_activity",
        narrator=narrator_json("long_activity", "eat " * 50_000),
        truncated=("event",),
        check=activity_is(("eat " * 50_000).rstrip(".")[:2000] + "… [198,000 more characters]"),
    ),
    Attack(
        "long_exception_message",
        program=code("long_exception_message", "raise ValueError('x' * 500000)\n"),
        status="error",
        kind="code_runtime",
        error=lambda message: message.startswith("code_runtime: ValueError: xxx") and len(message) < 4000,
    ),
    Attack(
        "long_unknown_action",
        program=code("long_unknown_action", "get_character('David').set_target_action('z' * 1000)\n" + SIT),
        status="error",
        kind="unknown_action",
        error=lambda message: "z" * 1000 in message and len(message) < 4000,
    ),
    Attack(
        "huge_prose_narrator",
        narrator="huge_prose_narrator " + "x" * 1_000_000,
        status="error",
        kind="narrator_format",
        error="narrator_format: reply is not valid JSON (Expecting value: line 1 column 1)",
    ),
    Attack(
        "names_as_one_huge_string",
        narrator=json.dumps(
            {
                "reasoning": "names_as_one_huge_string",
                "event": {"characters": "David" + "x" * 1_000_000, "activity": "eat"},
            }
        ),
        check=activity_is("eat"),  # Python's `in` on a string: David is named
    ),
]

INVALID_UNICODE = [
    Attack(
        "surrogate_character_name",
        program=code("surrogate_character_name", "get_character('\\ud800').set_target_action('eat')\n" + EAT + SIT),
        surrogates=("code",),
        check=lambda record: set(record["plan"]) == {"\ufffd", "David"},
    ),
    Attack(
        "surrogate_dict_key",
        narrator='{"reasoning": "surrogate_dict_key", "\\ud800": {"\\udfff": ["\\ud800"]}, '
        '"event": {"characters": ["David"], "activity": "eat"}}',
        surrogates=("event",),
        check=activity_is("eat"),
    ),
    Attack(
        "surrogate_in_names_string",
        narrator='{"reasoning": "surrogate_in_names_string", '
        '"event": {"characters": "\\ud800David", "activity": "eat"}}',
        surrogates=("event",),
        check=activity_is("eat"),  # Python's `in` on the cleaned string still finds David
    ),
    Attack(
        "surrogate_in_a_skip",
        narrator='{"reasoning": "surrogate_in_a_skip", "event": {"characters": [], "activity": "\\ud800"}}',
        status="error",
        kind="missing_character",
        error="missing_character: David not found in the planning result",
        surrogates=("event",),
        check=lambda record: (record["plan"], record["event"]) == ({}, None),
    ),
    Attack(
        "surrogate_printed",
        program=code("surrogate_printed", "print('\\ud800', '\\udfff' * 1000)\n" + BENIGN_BODY),
        check=plan_is(BENIGN_PLAN),  # printed text is not part of the result
        surrogates=("code",),  # but the worker repaired what the code handed back, and the record says so
    ),
    Attack(
        "valid_surrogate_pair",
        narrator=narrator_json("valid_surrogate_pair", "eat \ud83d\ude00"),  # json.dumps writes \ud83d\ude00
        check=activity_is("eat \U0001f600"),  # a pair spelled in JSON is one valid character: nothing to repair
    ),
    Attack(
        "nul_and_noncharacters",
        narrator=narrator_json("nul_and_noncharacters", "eat\u0000\uffff\ufffe\U0010ffff"),
        check=activity_is("eat\u0000\uffff\ufffe\U0010ffff"),  # valid Unicode, kept exactly
    ),
    Attack(
        "surrogate_in_a_repr",
        program=code(
            "surrogate_in_a_repr", "get_character('David').set_target_action('eat')\nraise KeyError('\\ud800')\n"
        ),
        status="error",
        kind="code_runtime",
        error="code_runtime: KeyError: '\\ud800'",  # a repr escapes the surrogate: nothing to repair
    ),
    Attack(
        "surrogate_orientation",
        program=code("surrogate_orientation", EAT + SIT + "get_character('David').set_orientation('\\udfff')\n"),
        surrogates=("code",),
        check=lambda record: record["plan"]["David"]["relationships"] == ["sit on chair_2", "look at \ufffd"],
    ),
]

ATTACKS = PARSER_COMPLEXITY + UNBOUNDED_SIZES + INVALID_UNICODE
EVERY = REGRESSIONS + ATTACKS


@dataclass(frozen=True)
class Batch:
    process: Outcome
    out: Path
    records: dict[str, dict[str, Any]]  # script entry name → record


@pytest.fixture(scope="module")
def hostile_text_batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    require_data()
    root = tmp_path_factory.mktemp("hostile-text")
    out = root / "run"
    script: list[ScriptedRun] = []
    for attack in EVERY:
        script += [
            attack.run(),
            ScriptedRun(f"benign-after-{attack.name}", narrator_json(f"benign-after-{attack.name}")),
        ]
    with OpenAIServer(RunScript(script)) as server:
        args = run_args(server.base_url, out, len(script), "--concurrency", "1")
        process = edsb_child(args, env=child_env(root / "cache"), cwd=root)
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    assert process.returncode == 0, process.stderr[-3000:]
    by_key = {record["key"]: record for record in read_results(out)}
    names = runs_by_name(out, [run.name for run in script])
    yield Batch(process, out, {name: by_key[key] for name, key in names.items()})


def test_the_suite_covers_every_family(hostile_text_batch: Batch) -> None:
    assert len(ATTACKS) >= 15 and min(map(len, (PARSER_COMPLEXITY, UNBOUNDED_SIZES, INVALID_UNICODE))) >= 5
    assert len({attack.name for attack in EVERY}) == len(EVERY)
    assert len(hostile_text_batch.records) == 2 * len(EVERY)


@pytest.mark.parametrize("attack", EVERY, ids=[attack.name for attack in EVERY])
def test_the_attack_is_recorded_exactly_and_the_next_run_is_unaffected(
    hostile_text_batch: Batch, attack: Attack
) -> None:
    record = hostile_text_batch.records[attack.name]
    assert (record["status"], record["error_kind"]) == (attack.status, attack.kind), record["error"]
    if callable(attack.error):
        assert attack.error(record["error"]), record["error"]
    else:
        assert record["error"] == attack.error
    assert record["surrogates_replaced"] == list(attack.surrogates)
    assert record["truncated"] == list(attack.truncated)
    attack.check(record)
    following = hostile_text_batch.records[f"benign-after-{attack.name}"]
    assert (following["status"], following["error"]) == ("passed", None)
    assert following["plan"] == BENIGN_PLAN
    assert following["event"] == {"characters": ["David"], "activity": "eat a sandwich sitting in the kitchen"}
    assert (following["surrogates_replaced"], following["truncated"]) == ([], [])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def assert_valid_utf8_json_lines(path: Path) -> int:
    """Every line of `path` is strict UTF-8 JSON whose strings hold no surrogate (not even as `\\ud800` escapes)."""
    lines = path.read_bytes().decode("utf-8").splitlines()  # strict: raises on invalid UTF-8
    for line in lines:
        assert not any(has_surrogates(text) for text in _strings(json.loads(line))), line[:300]
    return len(lines)


def test_results_and_transcripts_are_valid_utf8_json(hostile_text_batch: Batch) -> None:
    assert assert_valid_utf8_json_lines(hostile_text_batch.out / "results.jsonl") == 2 * len(EVERY)
    assert assert_valid_utf8_json_lines(hostile_text_batch.out / "transcripts" / "requests.jsonl") > 2 * len(EVERY)


def test_every_result_line_is_small(hostile_text_batch: Batch) -> None:
    """The replies reached 2 MB; what a result keeps of them is bounded (2,000 characters a string, 4,000 a message)."""
    lines = (hostile_text_batch.out / "results.jsonl").read_bytes().splitlines()
    assert max(len(line) for line in lines) < 16 << 10


def test_the_transcripts_keep_the_replies_whole(hostile_text_batch: Batch) -> None:
    narrator = {r["response"]["text"] for r in transcript_records(hostile_text_batch.out) if r["module"] == "narrator"}
    assert narrator_json("narrator_pathological_activity", PATHOLOGICAL) in narrator
