"""`edsb run --batch` against a loopback fake of OpenAI's Batch API (tests/support/openai_batch.py): the verdicts of
a synchronous run on the same scripted answers, in two passes; a kill -9 between create and collect pays for
nothing twice; `--detach` then collect; an expired batch; requests that fail inside a batch; a refused setting; a
provider without a batch API."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from edsb.report.render import token_rows
from edsb.report.summary import build_summary
from edsb.results.batches import read_batches, write_batch
from edsb.results.rundir import load_results
from edsb.runner.batch import BatchSession
from tests.support.anthropic_batch import AnthropicBatchServer
from tests.support.azure_batch import AzureBatchServer
from tests.support.batch_runs import (
    PROBE_OK,
    SELECTION,
    batch_args,
    verdicts,
)
from tests.support.edsb_cli import (
    SAMPLER_SECRET,
    child_env,
    edsb_child,
    edsb_in_process,
    run_edsb,
    scripted_run_args,
    start_edsb,
    wait_until,
)
from tests.support.gemini_batch import GeminiBatchServer
from tests.support.openai_batch import OpenAIBatchServer
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.provider_fakes import CONTEXT_TOO_LONG
from tests.support.run_dir import read_results
from tests.support.scripted_stories import StoryModel


def _batch_args(server: OpenAIBatchServer, out: Path, *options: str) -> list[str]:
    return batch_args(server.base_url, out, *options)


def test_a_batch_sweep_gets_the_synchronous_verdicts_in_two_passes(
    story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, sent_one_by_one = synchronous
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        assert run_edsb(*_batch_args(server, tmp_path / "batch")) == 0
        ids = server.custom_ids()
        batches = list(server.batches.values())
        sync_requests = server.sync_requests
    assert verdicts(tmp_path / "batch") == expected
    # Pass 1 the Narrator's requests, pass 2 the Event Parser's; the last pass sends nothing.
    # Pass 1 the Narrator's requests; pass 2 the Event Parser's request of case 13 (case 21's Narrator lets nobody
    # act); the last pass sends nothing.
    assert [len(lines) for lines in batches] == [2, 1]
    assert len(ids) == len(set(ids)) == sent_one_by_one  # every request paid for once
    assert sync_requests == 1  # check-model's probe, nothing else one by one
    records = read_batches(tmp_path / "batch")
    assert [record.stage for record in records] == ["collected", "collected"]
    assert all(record.batch_id for record in records) and records[0].answered == 2
    config = json.loads((tmp_path / "batch" / "config.json").read_text())
    assert config["batch"] is True
    # The report prices a batch run at batch prices (here as if the model had a list price: gpt-4o's).
    summary = build_summary(load_results(tmp_path / "batch"))
    _, price = token_rows(summary, {**config, "model": "openai:gpt-4o-2024-08-06"}, (None, None))
    assert price is not None and price.input_per_million == 1.25 and "batch" in price.source


def test_a_kill_between_create_and_collect_loses_nothing_and_pays_nothing_twice(
    story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path, private_cache: Path
) -> None:
    expected, sent_one_by_one = synchronous
    out = tmp_path / "batch"
    env = child_env(private_cache, OPENAI_API_KEY="not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.held = True  # the first batch stays in progress until the kill
        process = start_edsb(_batch_args(server, out), env=env, stderr=subprocess.PIPE, start_new_session=True)
        try:
            wait_until(lambda: _recorded_id(out), process, "the batch id on disk")
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
        assert len(server.batches) == 1
        server.held = False
        # The same command: it polls the recorded batch, collects it and goes on.
        resumed = edsb_child(_batch_args(server, out), env=env)
        assert resumed.returncode == 0, resumed.stderr
        ids = server.custom_ids()
    assert len(ids) == len(set(ids)) == sent_one_by_one  # nothing sent twice
    assert verdicts(out) == expected


def _recorded_id(out: Path) -> bool:
    return any(record.batch_id for record in read_batches(out))  # each record is replaced whole: never half read


def test_a_batched_request_is_byte_identical_to_the_synchronous_one(
    story: StoryModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body in the batch file is the bytes the synchronous client posts for the same request."""
    with OpenAIServer(story) as server:
        args = scripted_run_args(server.base_url, tmp_path / "sync", *SELECTION, "--no-cache")
        assert run_edsb(*args) == 0
        sync_bodies = sorted(request.body for request in server.chat_requests)
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as batch_server:
        assert run_edsb(*_batch_args(batch_server, tmp_path / "batch")) == 0
        uploaded = batch_server.inputs()
    head = b'"url":"/v1/chat/completions","body":'
    assert sorted(line.split(head, 1)[1][:-1] for data in uploaded for line in data.splitlines()) == sync_bodies


def test_detach_submits_and_exits_and_the_same_command_collects(
    story: StoryModel,
    synchronous: tuple[dict, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected, _ = synchronous
    out = tmp_path / "batch"
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.held = True
        assert run_edsb(*_batch_args(server, out, "--detach")) == 0  # submitted pass 1, exited
        assert run_edsb(*_batch_args(server, out, "--detach")) == 0  # still in flight: nothing new sent
        assert len(server.batches) == 1 and not read_results(out)
        server.held = False
        # A synchronous pass may finish what a batch run began: the answers already collected are cache hits.
        assert run_edsb(*_batch_args(server, out, "--detach")) == 0  # collects pass 1, submits pass 2
        assert len(server.batches) == 2
        server.sync = story
        synchronous_pass = edsb_in_process(scripted_run_args(server.base_url, out, *SELECTION), capsys)
        # pass 1's answers are in the cache; pass 2's batch was never collected, so its one request goes again
        assert server.sync_requests == 3  # two probes, then that request
    assert synchronous_pass.returncode == 0
    assert "1 batch(es) of `edsb run --batch` may still be in flight here" in synchronous_pass.stderr
    assert verdicts(out) == expected
    card = json.loads(run_card_json(out))["run"]["batch"]
    assert card["prices"] == "list" and len(card["batch_ids"]) == 2  # the last pass went one by one


def test_an_expired_batch_and_failed_requests_go_into_the_next_batch(
    story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, _ = synchronous
    failed_once: set[str] = set()

    def line_reply(line: dict) -> Reply | None:
        """A server error for each Event Parser request, the first time it comes."""
        if "Event to Parse" in line["body"]["messages"][-1]["content"] and line["custom_id"] not in failed_once:
            failed_once.add(line["custom_id"])
            return Reply.error(500, "The server had an error while processing your request.")
        return None

    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK, line_reply=line_reply) as server:
        server.expire = 1  # the first batch expires unanswered
        assert run_edsb(*_batch_args(server, tmp_path / "batch")) == 0
        sizes = [len(lines) for lines in server.batches.values()]
    assert sizes == [2, 2, 1, 1]  # expired, resent; the failed Event Parser request, resent
    assert verdicts(tmp_path / "batch") == expected
    failures = [record.failures for record in read_batches(tmp_path / "batch")]
    assert [next(iter(f.values()))["kind"] if f else None for f in failures] == ["expired", None, "failed", None]


def test_a_prompt_the_batch_refuses_is_the_models_request_rejected(
    story: StoryModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def line_reply(line: dict) -> Reply | None:
        return CONTEXT_TOO_LONG if "Event to Parse" in line["body"]["messages"][-1]["content"] else None

    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK, line_reply=line_reply) as server:
        run_edsb(*_batch_args(server, tmp_path / "batch"))
        sizes = [len(lines) for lines in server.batches.values()]
    assert sizes == [2, 1]  # a refused prompt is not sent again
    assert verdicts(tmp_path / "batch") == {
        "ours/tc13-d0-r0": ("error", "request_rejected"),
        "ours/tc21-d0-r0": ("passed", None),
    }


def test_a_refused_setting_stops_before_any_batch(
    story: StoryModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = "Unsupported value: 'temperature' does not support 0.1 with this model. Only the default (1) value is "
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=Reply.error(400, refusal + "supported.")) as server:
        outcome = edsb_in_process(_batch_args(server, tmp_path / "batch"), capsys)
        assert not server.files and not server.batches and server.sync_requests == 1
    assert outcome.returncode == 1 and "temperature" in outcome.stderr and "fix:" in outcome.stderr
    assert not read_batches(tmp_path / "batch")


def test_a_provider_without_a_batch_api_is_one_line_before_anything_is_sent(
    story: StoryModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "not-a-secret")
    with OpenAIServer(story) as server:
        args = ["run", "--model", "groq:llama-3.3-70b", "--base-url", server.base_url, *SELECTION, "--batch",
                "--out", str(tmp_path / "batch")]  # fmt: skip
        outcome = edsb_in_process(args, capsys)
        assert not server.requests
    outcome.assert_one_clear_error(2, contains="no batch API")
    assert not (tmp_path / "batch").exists()


def test_batch_in_a_config_file_holds_when_the_flag_is_left_out(
    story: StoryModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`batch = true` in a `--config` file is the run's, as `--batch` is: a flag left out does not turn it off."""
    monkeypatch.setenv("GROQ_API_KEY", "not-a-secret")
    config = tmp_path / "run.toml"
    config.write_text("batch = true\n")
    with OpenAIServer(story) as server:
        args = ["run", "--model", "groq:llama-3.3-70b", "--base-url", server.base_url, *SELECTION, "--config",
                str(config), "--out", str(tmp_path / "batch")]  # fmt: skip
        outcome = edsb_in_process(args, capsys)
        assert not server.requests
    outcome.assert_one_clear_error(2, contains="no batch API")


# Per SDK route: the model, its key variable, the fake, and each batched request as (its key, the native body the
# synchronous client posts for it, the one-hour TTL of the cache marks taken out).
SDK_ROUTES = {
    "anthropic": ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", AnthropicBatchServer,
                  lambda entry: (entry["custom_id"], _without_ttl(entry["params"]))),
    "google": ("google:gemini-2.5-flash", "GEMINI_API_KEY", GeminiBatchServer,
               lambda entry: (entry["metadata"]["edsb_key"],
                              {k: v for k, v in entry["request"].items() if k != "model"})),
}  # fmt: skip


@pytest.mark.parametrize("provider", list(SDK_ROUTES))
def test_sdk_batches_get_the_synchronous_verdicts_from_the_same_requests(
    provider: str, story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Message Batches and Gemini's batch mode: the synchronous client's request bodies (on Anthropic, but for the
    cache marks' one-hour TTL, which leaves the request keys, and so the answers the next pass finds, unchanged)."""
    expected, sent_one_by_one = synchronous
    model, key_variable, fake, entry_of = SDK_ROUTES[provider]
    monkeypatch.setenv(key_variable, "not-a-secret")
    selection = ("--model", model, *SELECTION, "--sampler-secret", SAMPLER_SECRET)
    with OpenAIServer(story) as server:
        sync_args = ["run", "--base-url", server.root_url, *selection, "--no-cache", "--out", str(tmp_path / "one")]
        assert run_edsb(*sync_args) == 0
        sync_bodies = [request.json() for request in server.native_requests]
    with fake(story, probe=PROBE_OK) as batch_server:
        args = ["run", "--base-url", batch_server.root_url, *selection, "--batch", "--batch-poll", "0.01"]
        assert run_edsb(*args, "--out", str(tmp_path / "batch")) == 0
        entries = [entry for requests in batch_server.batches.values() for entry in requests]
        batch_ids = list(batch_server.batches)
    batched = [entry_of(entry) for entry in entries]
    assert verdicts(tmp_path / "batch") == verdicts(tmp_path / "one") == expected
    assert len(batched) == len({key for key, _ in batched}) == sent_one_by_one
    assert sorted((body for _, body in batched), key=json.dumps) == sorted(sync_bodies, key=json.dumps)
    card = json.loads(run_card_json(tmp_path / "batch"))["run"]["batch"]
    assert card["provider"] == provider and card["batch_ids"] == batch_ids
    assert card.get("prompt_cache_ttl") == ("1h" if provider == "anthropic" else None)
    if provider == "anthropic":  # every cache mark sent with the one-hour TTL
        marks = [block["cache_control"] for entry in entries for block in entry["params"]["system"]]
        assert marks and all(mark == {"type": "ephemeral", "ttl": "1h"} for mark in marks)


def _without_ttl(params: Any) -> Any:
    if isinstance(params, dict):
        return {k: _without_ttl(v) for k, v in params.items() if k != "ttl"}
    if isinstance(params, list):
        return [_without_ttl(v) for v in params]
    return params


def run_card_json(out: Path) -> str:
    from edsb.report.card import results_document
    from edsb.report.render import open_run

    run, summary = open_run(out)
    return json.dumps(results_document(out, run.config, run.results, summary))


def test_export_then_import_runs_the_sweep_through_files_for_an_offline_batch(
    story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path
) -> None:
    """`--batch-export` writes OpenAI batch JSONL and sends nothing; the answers, in the output format vLLM's
    `run-batch` writes (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html, one line per request:
    `custom_id` and `response` with `status_code` and `body`), come back with `--batch-import`."""
    expected, sent_one_by_one = synchronous
    out = tmp_path / "batch"
    with OpenAIServer(story) as server:  # names the endpoint (the cache's keys); never asked
        args = scripted_run_args(server.base_url, out, *SELECTION)
        assert run_edsb(*args, "--batch-export", tmp_path / "in1.jsonl") == 0
        _run_batch_offline(story, tmp_path / "in1.jsonl", tmp_path / "out1.jsonl")
        flags = ("--batch-import", tmp_path / "out1.jsonl", "--batch-export", tmp_path / "in2.jsonl")
        assert run_edsb(*args, *flags) == 0
        _run_batch_offline(story, tmp_path / "in2.jsonl", tmp_path / "out2.jsonl")
        assert run_edsb(*args, "--batch-import", tmp_path / "out2.jsonl") == 0
        assert not server.requests
    sizes = [len((tmp_path / name).read_bytes().splitlines()) for name in ("in1.jsonl", "in2.jsonl")]
    assert sizes == [2, 1] and sum(sizes) == sent_one_by_one
    assert verdicts(out) == expected
    recorded = json.loads((out / "config.json").read_text())
    assert not {"batch_export", "batch_import", "detach"} & set(recorded)  # one invocation's, not the run's


def _run_batch_offline(story: StoryModel, source: Path, output: Path) -> None:
    """What an offline batch server does with the file: each line answered, in the batch output format."""
    lines = []
    for raw in source.read_bytes().splitlines():
        line = json.loads(raw)
        assert line["url"] == "/v1/chat/completions" and line["method"] == "POST"
        request = RecordedRequest("POST", line["url"], {}, json.dumps(line["body"]).encode(), time.monotonic())
        body = json.loads(story(request).body)
        response = {"status_code": 200, "request_id": f"req-{len(lines)}", "body": body}
        lines.append({"id": f"batch-req-{len(lines)}", "custom_id": line["custom_id"], "response": response,
                      "error": None})  # fmt: skip
    output.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_a_batch_run_resumes_a_synchronous_directory_and_finds_a_batch_it_did_not_record(
    story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synchronous pass ran case 21; `--batch` sends only case 13's requests. Its first batch's id is then lost
    (as by a kill during the create call): the next invocation finds the batch by its tag instead of paying again."""
    expected, _ = synchronous
    out = tmp_path / "batch"
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        server.sync = story
        only_21 = ["--cases", "21", *SELECTION[2:]]
        assert run_edsb(*scripted_run_args(server.base_url, out, *only_21)) == 0
        server.sync, server.held = None, True
        assert run_edsb(*_batch_args(server, out, "--detach")) == 0
        (record,) = read_batches(out)
        intent = record.model_copy(update={"stage": "intent", "batch_id": None, "submitted_at": None})
        write_batch(out, intent)
        server.held = False
        assert run_edsb(*_batch_args(server, out)) == 0
        ids = server.custom_ids()
    assert len(ids) == len(set(ids)) == 2  # case 13's Narrator and Event Parser requests, each once
    assert read_batches(out)[0].batch_id == record.batch_id
    assert verdicts(out) == expected


def test_progress_names_the_pass_the_batch_its_counts_and_age_within_80_columns(
    story: StoryModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    monkeypatch.setenv("COLUMNS", "80")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        args = [arg for arg in _batch_args(server, tmp_path / "batch") if arg != "--quiet"]
        outcome = edsb_in_process(args, capsys)
    assert outcome.returncode == 0, outcome.stderr
    ours = [line for line in outcome.stderr.splitlines() if line.startswith(("pass ", "  batch "))]
    assert ours and all(len(line) <= 80 for line in ours), ours
    shown = "\n".join(ours)
    first = r"^pass 1 \| oldest batch 0:00:\d\d \| cost: no price known\n  batch 1 in_progress: 0/2 answered, 0 failed$"
    assert re.search(first, shown, re.MULTILINE), shown
    assert re.search(r"^  batch 2 completed: 1/1 answered, 0 failed$", shown, re.MULTILINE), shown


def test_responses_api_batches_get_the_synchronous_verdicts(
    story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, sent_one_by_one = synchronous
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        args = [*_batch_args(server, tmp_path / "batch")]
        args[args.index("openai:scripted")] = "openai-responses:scripted"
        # check-model's probe goes to the synchronous Responses endpoint, which this fake does not serve
        monkeypatch.setattr(BatchSession, "_probe", lambda self: None)
        assert run_edsb(*args) == 0
        lines = [line for lines in server.batches.values() for line in lines]
    assert {line["url"] for line in lines} == {"/v1/responses"} and len(lines) == sent_one_by_one
    assert verdicts(tmp_path / "batch") == expected


def test_a_pass_over_the_apis_limits_goes_in_several_batches(
    story: StoryModel, synchronous: tuple[dict, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edsb.llm.batch.openai import OpenAIBatch

    expected, _ = synchronous
    monkeypatch.setattr(OpenAIBatch, "max_requests", 1)  # as if each request filled a batch
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIBatchServer(story, probe=PROBE_OK) as server:
        assert run_edsb(*_batch_args(server, tmp_path / "batch")) == 0
        sizes = [len(lines) for lines in server.batches.values()]
    assert sizes == [1, 1, 1]
    assert verdicts(tmp_path / "batch") == expected


def test_azure_deployment_batches_get_the_synchronous_verdicts(
    story: StoryModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`azure:<deployment>` through Azure's Batch API on a classic resource endpoint: the files and batches under
    `/openai/` with the `api-version` query and the `api-key` header, each line naming the deployment as its model
    and posting to `/chat/completions`, each body the bytes the synchronous deployment URL gets."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "not-a-secret")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "http://127.0.0.1:9")  # --base-url wins
    with AzureBatchServer(story, deployments={"eval-4o"}, probe=PROBE_OK) as server:
        server.sync = story
        args = [*batch_args(server.base_url, tmp_path / "one", "--no-cache")]
        args[args.index("openai:scripted")] = "azure:eval-4o"
        assert run_edsb(*[arg for arg in args if arg != "--batch"]) == 0  # one by one
        sent_one_by_one, server.sync = server.sync_requests, None
        sync_bodies = sorted((json.loads(body) for body in server.sync_bodies), key=json.dumps)
        args[args.index(str(tmp_path / "one"))] = str(tmp_path / "batch")
        assert run_edsb(*[arg for arg in args if arg != "--no-cache"]) == 0
        lines = [line for batch in server.batches.values() for line in batch]
        calls = list(server.calls)
    assert verdicts(tmp_path / "batch") == verdicts(tmp_path / "one")
    assert {status for status, _ in verdicts(tmp_path / "batch").values()} == {"passed", "failed"}
    assert len(lines) == sent_one_by_one and {line["url"] for line in lines} == {"/chat/completions"}
    assert {line["body"]["model"] for line in lines} == {"eval-4o"}
    assert sorted((line["body"] for line in lines), key=json.dumps) == sync_bodies
    batch_calls = [call for call in calls if not call[1].startswith("/openai/deployments/")]
    assert {path.split("/")[2] for _, path, _, _ in batch_calls} == {"files", "batches"}
    assert all(query.startswith("api-version=2024-10-21") and key == "not-a-secret" for _, _, query, key in calls)
