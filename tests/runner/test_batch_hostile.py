"""`edsb run --batch` against a batch server that lies, breaks or fails, and a sweep stopped at every step: what
comes back is never stored under a key it does not belong to, a damaged answer is asked again rather than trusted or
fatal, a failing API is one line that says whose fault it is, and a stopped or killed sweep resumes paying for
nothing twice. Through the real `edsb run --batch` against the loopback fake of OpenAI's Batch API
(tests/support/openai_batch.py), made hostile."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from edsb.llm.batch import MAX_LINE_BYTES
from edsb.results.batches import batches_dir, read_batches, write_batch
from tests.support.anthropic_batch import AnthropicBatchServer
from tests.support.batch_runs import PROBE_OK, Verdicts, batch_args, verdicts
from tests.support.edsb_cli import child_env, edsb_child, edsb_in_process, run_edsb, start_edsb, wait_until
from tests.support.openai_batch import OpenAIBatchServer
from tests.support.scripted_stories import StoryModel

POISON = "poison: an answer to a request edsb never made"


@pytest.fixture(autouse=True)
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")


def _first_batch_only(tamper: Callable[[list[bytes]], list[bytes]]) -> Callable[[bytes], bytes]:
    """The output file of the first batch rewritten line by line; the batches after it served as they are."""
    done: list[bool] = []

    def rewrite(output: bytes) -> bytes:
        if done:
            return output
        done.append(True)
        return b"".join(line + b"\n" for line in tamper(output.splitlines()))

    return rewrite


def _answer(line: bytes, text: str) -> bytes:
    entry = json.loads(line)
    entry["response"]["body"]["choices"][0]["message"]["content"] = text
    return json.dumps(entry, ensure_ascii=False).encode()


def _cached(cache_dir: Path) -> dict[str, str]:
    with sqlite3.connect(cache_dir / "responses.sqlite3") as db:
        return dict(db.execute("SELECT key, response FROM responses"))


def test_foreign_and_doubled_answers_never_reach_the_cache(
    story: StoryModel, synchronous: tuple[Verdicts, int], tmp_path: Path, private_cache: Path
) -> None:
    """A line for an id never asked (another directory's, another model's: any key but this batch's own), and an id
    answered twice, the second time with another answer: neither lands in the cache; the doubled one is asked again."""
    expected, _ = synchronous
    foreign = "0" * 64

    def hostile(lines: list[bytes]) -> list[bytes]:
        stranger = json.loads(_answer(lines[0], POISON))
        return [*lines, json.dumps({**stranger, "custom_id": foreign}).encode(), _answer(lines[0], POISON)]

    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.tamper = _first_batch_only(hostile)
        assert run_edsb(*batch_args(server.base_url, tmp_path / "batch")) == 0
        asked = server.custom_ids()
        sizes = [len(lines) for lines in server.batches.values()]
    cached = _cached(private_cache)
    assert not [key for key, response in cached.items() if POISON in response]
    assert foreign not in cached and set(cached) <= set(asked)
    assert sizes == [2, 1, 1]  # the doubled request, asked again
    assert verdicts(tmp_path / "batch") == expected


def test_an_answer_to_a_request_edsb_did_not_send_is_not_kept(
    story: StoryModel, synchronous: tuple[Verdicts, int], tmp_path: Path, private_cache: Path
) -> None:
    """The ids match, the requests do not: the server answered each Narrator line with the other case's prompt.
    Its input file gives it away; both are asked again, and neither crossed answer reaches the cache."""
    expected, sent_one_by_one = synchronous
    done: list[bool] = []

    def crossed(lines: list[dict]) -> list[dict]:
        if done or len(lines) != 2:
            return lines
        done.append(True)
        first, second = lines
        return [{**first, "body": second["body"]}, {**second, "body": first["body"]}]

    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.mangle = crossed
        assert run_edsb(*batch_args(server.base_url, tmp_path / "batch")) == 0
        ids = server.custom_ids()
    assert done and len(ids) == sent_one_by_one + 2 and len(set(ids)) == sent_one_by_one
    assert verdicts(tmp_path / "batch") == expected


def _torn(lines: list[bytes]) -> list[bytes]:
    return [*lines[:-1], lines[-1][: len(lines[-1]) // 2]]


def _huge(lines: list[bytes]) -> list[bytes]:
    """A whole, valid answer, but longer than a synchronous reply may be."""
    entry = json.loads(lines[0])
    entry["padding"] = "x" * MAX_LINE_BYTES
    return [json.dumps(entry).encode(), *lines[1:]]


DAMAGE: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "torn last line": _torn,
    "invalid UTF-8": lambda lines: [_answer(lines[0], "é").replace("é".encode(), b"\xff\xfe"), *lines[1:]],
    "a JSON array": lambda lines: [b"[1, 2]", *lines[1:]],
    "response of the wrong type": lambda lines: [
        json.dumps({**json.loads(lines[0]), "response": "x"}).encode(),
        *lines[1:],
    ],
    "a 200 without its body": lambda lines: [
        json.dumps({**json.loads(lines[0]), "response": {"status_code": 200, "body": "x"}}).encode(),
        *lines[1:],
    ],
    "no response field": lambda lines: [
        json.dumps({k: v for k, v in json.loads(lines[0]).items() if k != "response"}).encode(),
        *lines[1:],
    ],
    "a line over the reply limit": _huge,
    "completed with a line missing": lambda lines: lines[1:],
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_output_line_is_asked_again_not_trusted_nor_fatal(
    damage: str, story: StoryModel, synchronous: tuple[Verdicts, int], tmp_path: Path
) -> None:
    expected, sent_one_by_one = synchronous
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.tamper = _first_batch_only(DAMAGE[damage])
        assert run_edsb(*batch_args(server.base_url, tmp_path / "batch")) == 0
        ids = server.custom_ids()
    assert len(ids) == sent_one_by_one + 1 and len(set(ids)) == sent_one_by_one  # the damaged one, asked again
    assert verdicts(tmp_path / "batch") == expected


@pytest.mark.parametrize("damage", ["torn last line", "invalid UTF-8", "a JSON array", "a line over the reply limit"])
def test_a_damaged_message_batch_result_is_asked_again(
    damage: str, story: StoryModel, synchronous: tuple[Verdicts, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same damage in the results of Anthropic's Message Batches (read line by line, as the SDK would not)."""
    expected, sent_one_by_one = synchronous
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-secret")
    damaged = {**DAMAGE, "invalid UTF-8": _invalid_utf8_result}[damage]
    with AnthropicBatchServer(story, probe=PROBE_OK) as server:
        server.tamper = _first_batch_only(damaged)
        args = batch_args(server.root_url, tmp_path / "batch")
        args[args.index("openai:scripted")] = "anthropic:claude-sonnet-4-5"
        assert run_edsb(*args) == 0
        ids = [entry["custom_id"] for requests in server.batches.values() for entry in requests]
    assert len(ids) == sent_one_by_one + 1 and len(set(ids)) == sent_one_by_one
    assert verdicts(tmp_path / "batch") == expected


def _invalid_utf8_result(lines: list[bytes]) -> list[bytes]:
    entry = json.loads(lines[0])
    entry["result"]["message"]["content"][0]["text"] = "é"
    return [json.dumps(entry, ensure_ascii=False).encode().replace("é".encode(), b"\xff\xfe"), *lines[1:]]


@pytest.mark.parametrize(
    ("route", "statuses", "says"),
    [
        ("create", [401], "batch API refused creating a batch (HTTP 401"),
        ("retrieve", [404], "batch API refused polling batch batch-"),
        # the input file (a server may refuse to give it back: the batch's tag vouches for it), then the output
        ("content", [403, 403], "batch API refused polling the batches (HTTP 403"),
    ],
)
def test_a_refusing_batch_api_is_one_line_and_the_same_command_goes_on(
    route: str,
    statuses: list[int],
    says: str,
    story: StoryModel,
    synchronous: tuple[Verdicts, int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """401, 403, 404 are the setup's fault (the key, the endpoint), as the synchronous path classes them: one line
    that says to check them; nothing is lost, and once fixed the same command goes on without paying twice."""
    expected, sent_one_by_one = synchronous
    out = tmp_path / "batch"
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.faults[route] = list(statuses)
        outcome = edsb_in_process(batch_args(server.base_url, out), capsys)
        outcome.assert_one_clear_error(1, contains=says)
        assert "check the key" in outcome.stderr and "nothing is lost" in outcome.stderr
        assert run_edsb(*batch_args(server.base_url, out)) == 0
        ids = server.custom_ids()
    assert len(ids) == len(set(ids)) == sent_one_by_one
    assert verdicts(out) == expected


def test_a_refused_message_batch_results_download_is_one_line_and_the_same_command_goes_on(
    story: StoryModel,
    synchronous: tuple[Verdicts, int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Anthropic's results file refused (a key revoked after the batch was made): the SDK's own error, classed as
    the setup's fault; the batch is collected by the same command once the key works."""
    expected, sent_one_by_one = synchronous
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-secret")
    with AnthropicBatchServer(story, probe=PROBE_OK) as server:
        server.results_faults = [401]
        args = batch_args(server.root_url, tmp_path / "batch")
        args[args.index("openai:scripted")] = "anthropic:claude-sonnet-4-5"
        outcome = edsb_in_process(args, capsys)
        (error,) = [line for line in outcome.stderr.splitlines() if line.startswith("edsb: error: ")]
        assert outcome.returncode == 1 and "Traceback" not in outcome.stderr  # beside it: the temperature's note
        assert "(HTTP 401" in error and "check the key" in error and "nothing is lost" in error
        assert run_edsb(*args) == 0
        ids = [entry["custom_id"] for requests in server.batches.values() for entry in requests]
    assert len(ids) == len(set(ids)) == sent_one_by_one
    assert verdicts(tmp_path / "batch") == expected


@pytest.mark.parametrize(("route", "status"), [("upload", 502), ("create", 500), ("retrieve", 429), ("content", 503)])
def test_a_passing_batch_api_failure_is_retried_where_the_provider_says_retry(
    route: str, status: int, story: StoryModel, synchronous: tuple[Verdicts, int], tmp_path: Path
) -> None:
    expected, sent_one_by_one = synchronous
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.faults[route] = [status]
        assert run_edsb(*batch_args(server.base_url, tmp_path / "batch")) == 0
        assert server.faults[route] == []  # it was answered, then retried
        ids = server.custom_ids()
    assert len(ids) == len(set(ids)) == sent_one_by_one
    assert verdicts(tmp_path / "batch") == expected


def test_a_bad_minute_while_polling_is_said_and_the_wait_goes_on(
    story: StoryModel, synchronous: tuple[Verdicts, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Server errors on every attempt of one look (the SDK's own retries spent): said in one line, looked at again."""
    expected, _ = synchronous
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.faults["retrieve"] = [503] * 3  # the first attempt and the SDK's two retries
        outcome = edsb_in_process(batch_args(server.base_url, tmp_path / "batch"), capsys)
        assert server.faults["retrieve"] == []
    assert outcome.returncode == 0, outcome.stderr
    (said,) = [line for line in outcome.stderr.splitlines() if "batch API failed" in line]
    assert "Error code: 503" in said and "looking again in 0.01 s" in said
    assert verdicts(tmp_path / "batch") == expected


@pytest.mark.parametrize(("signum", "status", "says"), [(signal.SIGTERM, 143, "SIGTERM: stopped"),
                                                        (signal.SIGINT, 130, "interrupted")])  # fmt: skip
def test_a_batch_that_never_ends_is_stoppable_and_resumes(
    signum: int,
    status: int,
    says: str,
    story: StoryModel,
    synchronous: tuple[Verdicts, int],
    tmp_path: Path,
    private_cache: Path,
) -> None:
    """A batch left `in_progress`: the sweep says so, at each look, and a signal stops it with the status a stopped
    sweep exits with; the same command collects the batch (nothing sent twice)."""
    expected, sent_one_by_one = synchronous
    out = tmp_path / "batch"
    env = child_env(private_cache, OPENAI_API_KEY="not-a-secret")
    args = [arg for arg in batch_args("", out) if arg != "--quiet"]
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        args[args.index("--base-url") + 1] = server.base_url
        server.held = True
        process = start_edsb(args, env=env, stderr=subprocess.PIPE, start_new_session=True)
        wait_until(lambda: sum(server.polls.values()) >= 2, process, "two looks at the batch in progress")
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == status, stderr
        assert "batch 1 in_progress: 0/2 answered" in stderr.decode()
        assert says in stderr.decode() and "run the same command" in stderr.decode()
        server.held = False
        resumed = edsb_child(batch_args(server.base_url, out), env=env)
        ids = server.custom_ids()
    assert resumed.returncode == 0, resumed.stderr
    assert len(ids) == len(set(ids)) == sent_one_by_one
    assert verdicts(out) == expected


@pytest.mark.parametrize("route", ["upload", "create", "content"])
def test_a_kill_at_each_step_pays_for_nothing_twice_and_loses_nothing(
    route: str, story: StoryModel, synchronous: tuple[Verdicts, int], tmp_path: Path, private_cache: Path
) -> None:
    """kill -9 between the intent and the batch (the upload), between the batch and its id being recorded (create's
    reply), and while collecting: the same command finds or resends, and each request is paid for once."""
    expected, sent_one_by_one = synchronous
    out = tmp_path / "batch"
    env = child_env(private_cache, OPENAI_API_KEY="not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        arrived = server.stall(route)
        process = start_edsb(batch_args(server.base_url, out), env=env, stderr=subprocess.PIPE)
        try:
            wait_until(arrived.is_set, process, f"the {route} call")
        finally:
            process.kill()
            process.wait()
        resumed = edsb_child(batch_args(server.base_url, out), env=env)
        ids = server.custom_ids()
    assert resumed.returncode == 0, resumed.stderr
    assert len(ids) == len(set(ids)) == sent_one_by_one
    assert verdicts(out) == expected


def test_a_second_run_on_the_same_directory_is_refused(
    story: StoryModel,
    synchronous: tuple[Verdicts, int],
    tmp_path: Path,
    private_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected, sent_one_by_one = synchronous
    out = tmp_path / "batch"
    env = child_env(private_cache, OPENAI_API_KEY="not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.held = True
        first = start_edsb(batch_args(server.base_url, out), env=env, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: sum(server.polls.values()) >= 1, first, "the first run polling its batch")
            second = edsb_in_process(batch_args(server.base_url, out), capsys)
            one_by_one = edsb_in_process([arg for arg in batch_args(server.base_url, out) if arg != "--batch"], capsys)
            assert len(server.batches) == 1 and server.sync_requests == 1  # nothing sent by the second nor the third
        finally:
            server.held = False
            _, stderr = first.communicate(timeout=120)
        ids = server.custom_ids()
    for refused in (second, one_by_one):
        refused.assert_one_clear_error(1, contains="another edsb process is running in this run directory")
    assert first.returncode == 0, stderr
    assert len(ids) == len(set(ids)) == sent_one_by_one
    assert verdicts(out) == expected


def _swap_id(out: Path, batch_id: str) -> None:
    (record,) = read_batches(out)
    write_batch(out, record.model_copy(update={"batch_id": batch_id}))


HAND_EDITS: dict[str, Callable[[Path, str], None]] = {
    "torn": lambda out, other: (batches_dir(out) / "0001.json").write_text('{"format": 1, "numb'),
    "another directory's batch id": _swap_id,
    "renamed": lambda out, other: (batches_dir(out) / "0001.json").rename(batches_dir(out) / "0002.json"),
}


@pytest.mark.parametrize("edit", list(HAND_EDITS))
def test_a_torn_or_hand_edited_batch_record_is_one_line_naming_it(
    edit: str, story: StoryModel, tmp_path: Path, private_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Never trusted for what it does not say: a record whose id names another directory's batch would store that
    batch's answers here."""
    out, other = tmp_path / "batch", tmp_path / "other"
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.held = True
        for directory in (out, other):
            assert run_edsb(*batch_args(server.base_url, directory, "--detach")) == 0
        HAND_EDITS[edit](out, str(read_batches(other)[0].batch_id))
        server.held = False
        outcome = edsb_in_process(batch_args(server.base_url, out), capsys)
    outcome.assert_one_clear_error(1, contains=str(batches_dir(out)))
    assert not _cached(private_cache)  # nothing collected: neither batch's answers stored
