"""Lone surrogates in every field a reply can carry them in: the sweep completes, results and transcripts
stay valid UTF-8 JSON, each run is recorded with what was replaced, and a resume re-executes nothing. Raw surrogates
in a response's text and model name (a replayed transcript carries them) are replaced where the response enters."""

from __future__ import annotations

import json
from pathlib import Path

from tests.security.test_hostile_text import BENIGN_PLAN, SIT, assert_valid_utf8_json_lines, code
from tests.support.data import require_data
from tests.support.edsb_cli import child_env, edsb_child
from tests.support.hostile_script import RunScript, ScriptedRun
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import raw_lines, records_by_key
from tests.support.scripted_programs import BENIGN_BODY, VARIANT, run_args

# JSON escapes in the reply text: `json.loads` turns each into a lone surrogate.
NARRATOR = (
    '{"reasoning": "\\ud800 hungry \\udfff", "\\udc00": ["\\ud800"], "event": '
    '{"characters": ["\\ud800David", "David", "\\udbff"], "activity": "eat\\ud800 a sandwich \\udc00"}}'
)
PROGRAMS = {
    0: code("action", "get_character('David').set_target_action('\\ud800eat')\n" + SIT),
    1: code(
        "relationship",
        "get_character('David').set_target_action('eat')\n"
        "get_character('David').set_position(['sit on chair_2', '\\udfffclose to chair_1'])\n",
    ),
    2: code(
        "exception", "get_character('\\ud800').set_target_action('\\udc00')\nraise ValueError('\\ud800 x \\udfff')\n"
    ),
    3: code("unused", "note = '\\ud800 \\udfff'\n" + BENIGN_BODY),
}
EXPECTED = {  # repeat → (status, error_kind, error or None)
    0: ("error", "unknown_action", None),
    1: ("error", "unknown_relationship", None),
    2: ("error", "code_runtime", "code_runtime: ValueError: \ufffd x \ufffd"),
    3: ("passed", None, None),
}


def test_a_sweep_of_replies_full_of_lone_surrogates_completes_and_resumes(tmp_path: Path) -> None:
    require_data()
    out = tmp_path / "run"
    env = child_env(tmp_path / "cache")
    script = [ScriptedRun(f"run{i}", NARRATOR, PROGRAMS[i]) for i in range(4)]
    with OpenAIServer(RunScript(script)) as server:
        first = edsb_child(run_args(server.base_url, out, 4, "--concurrency", "1"), env=env, cwd=tmp_path)
        assert "Traceback" not in first.stderr, first.stderr[-3000:]
        assert first.returncode == 0, first.stderr[-3000:]
        lines = raw_lines(out)
        asked = len(server.chat_requests)
        again = edsb_child(run_args(server.base_url, out, 4, "--concurrency", "1"), env=env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(server.chat_requests) == asked == 8  # the resume asked nothing
    assert "4 runs planned, 4 already done, 0 executed" in again.stderr
    assert raw_lines(out) == lines  # and wrote nothing
    assert assert_valid_utf8_json_lines(out / "results.jsonl") == 4
    assert assert_valid_utf8_json_lines(out / "transcripts" / "requests.jsonl") >= 8
    records = {record["repeat"]: record for record in records_by_key(out).values()}
    for repeat, (status, kind, error) in EXPECTED.items():
        record = records[repeat]
        assert (record["status"], record["error_kind"]) == (status, kind), record["error"]
        if error is not None:
            assert record["error"] == error
        assert record["event"] == {"characters": ["David"], "activity": "eat\ufffd a sandwich \ufffd"}
        assert record["surrogates_replaced"] == (["event"] if repeat == 3 else ["code", "event"])
    assert records[0]["plan"]["David"]["target_action"] == ["\ufffdeat", "sit"]
    assert "\ufffdeat" in records[0]["error"]
    assert records[1]["plan"]["David"]["relationships"] == ["sit on chair_2", "\ufffdclose to chair_1"]
    assert "\ufffdclose to chair_1" in records[1]["error"]
    assert records[3]["plan"] == BENIGN_PLAN


def test_raw_surrogates_in_a_response_are_replaced_where_it_enters(tmp_path: Path) -> None:
    """A replayed transcript whose response texts and model name hold lone surrogates (as a client that decodes
    them would hand over): every run completes, flagged by module, and the model name is recorded cleaned."""
    require_data()
    recorded, replayed = tmp_path / "recorded", tmp_path / "replayed"
    env = child_env(tmp_path / "cache")
    script = [ScriptedRun(f"run{i}", json.dumps({"reasoning": f"run{i}", "event": _EVENT})) for i in range(2)]
    with OpenAIServer(RunScript(script)) as server:
        process = edsb_child(run_args(server.base_url, recorded, 2, "--concurrency", "1"), env=env, cwd=tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    transcript = recorded / "transcripts" / "requests.jsonl"
    lines = [json.loads(line) for line in transcript.read_text("utf-8").splitlines()]
    for line in lines:
        response = line.get("response")
        if response and line["module"] == "narrator":  # the event is unchanged, so the Event Parser's request is too
            response["text"] = response["text"].replace('"reasoning": "', '"reasoning": "\ud800')
        elif response:
            response["text"] = "\udfff " + response["text"]
        if response:
            response["model"] = "test-model-\udc00"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")  # written as \ud800 escapes
    args = ["run", "--model", f"replay:{recorded}", "--out", str(replayed), "--variant", VARIANT, "--cases", "13"]
    process = edsb_child([*args, "--distraction", "0", "--repeats", "2", "--quiet"], env=env, cwd=tmp_path)
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    assert process.returncode == 0, process.stderr[-3000:]
    assert assert_valid_utf8_json_lines(replayed / "results.jsonl") == 2
    assert assert_valid_utf8_json_lines(replayed / "transcripts" / "requests.jsonl") >= 4
    for record in records_by_key(replayed).values():
        assert (record["status"], record["plan"]) == ("passed", BENIGN_PLAN)
        assert record["surrogates_replaced"] == ["event_parser", "narrator"]
        assert record["model"] == "test-model-\ufffd"


_EVENT = {"characters": ["David"], "activity": "eat a sandwich sitting in the kitchen"}
