"""What a real `edsb run` leaves for readers who never open the run directory: `results.json` with its run card
(validated against the schema in docs/), the sample log that `jq` reads alone, and a text report that shows the
reasons a sweep's last line promises."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest

from edsb.report.card import RunCard, identity_host, results_schema
from edsb.sandbox.kernel import host_support
from tests.support.data import REPO
from tests.support.edsb_cli import Outcome
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import read_results, transcript_records
from tests.support.scripted_programs import CASE, VARIANT, ProgramScript, program, run_args

SECRET = "sk-edsb-test-never-written-0123456789"
SCHEMA = REPO / "docs" / "results-schema.json"
SCHEMA_DOC = REPO / "docs" / "results-schema.md"


@pytest.fixture
def keyed_run(
    edsb: Callable[..., Outcome], server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Two runs against the loopback server, its key in an environment variable that the files must not hold."""
    monkeypatch.setenv("EDSB_TEST_KEY", SECRET)
    out = tmp_path / "run"
    outcome = edsb(*run_args(server.base_url, out, 2, "--api-key-env", "EDSB_TEST_KEY", "--temperature", "0.3"))
    assert outcome.returncode == 0, outcome.stderr
    return out


def test_the_schema_in_docs_is_the_one_edsb_writes() -> None:
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == results_schema(), (
        "docs/results-schema.json is stale: regenerate it from edsb.report.card.results_schema()"
    )
    documented = SCHEMA_DOC.read_text(encoding="utf-8")
    for name in RunCard.model_fields:
        assert f"`{name}`" in documented, f"docs/results-schema.md does not describe run.{name}"


def test_results_json_carries_a_run_card_and_validates(
    keyed_run: Path, edsb: Callable[..., Outcome], server: OpenAIServer
) -> None:
    written = keyed_run / "results.json"
    assert (keyed_run / "summary.json").is_file() and written.is_file()
    document = json.loads(written.read_text(encoding="utf-8"))
    jsonschema.validate(document, json.loads(SCHEMA.read_text(encoding="utf-8")))
    report = edsb("report", keyed_run, "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout) == document  # the same document, recomputed from the directory

    card = document["run"]
    url = urlsplit(server.base_url)
    assert card["model"] == {"name": "openai:scripted", "endpoint_host": f"{url.hostname}:{url.port}",
                             "identities": card["model"]["identities"]}  # fmt: skip
    assert card["data"]["commit"] == "8a6f726951decf3327d4e015c11202c19dca1749"
    assert len(card["data"]["manifest_sha256"]) == 64 and card["data"]["files_match_manifest"] is True
    assert card["sampling"]["temperature"] == 0.3
    sent = card["sampling"]["sent"]
    assert {entry["module"] for entry in sent} == {"narrator", "event_parser"}
    assert sum(entry["requests"] for entry in sent) == len(server.chat_requests) == 4
    assert all(entry["temperature"] == 0.3 for entry in sent)
    assert (card["variants"], card["cases"], card["distraction"], card["repeats"]) == ([VARIANT], [CASE], [0], 2)
    ran_in = "exact" if host_support().exact else "restricted"  # what `--sandbox auto`, the default, picks here
    assert {record["sandbox"] for record in read_results(keyed_run)} == {ran_in}
    assert (card["sampler"], card["sandbox"], card["perturb"], card["seed"], card["preset"]) == (
        "reference", ran_in, 0, 0, None
    )  # fmt: skip
    assert card["started_at"] <= card["finished_at"]
    assert card["counts"] == {"planned": 2, "runs": 2, "judged": 2, "passed": 2, "failed": 0, "errors": 0,
                              "incomplete": 0}  # fmt: skip
    cell = document["variants"][VARIANT]["cells"]["Total"]["Total"]
    assert (cell["runs"], cell["success_rate"]) == (2, 1.0) and len(cell["success_interval"]) == 2
    assert SECRET not in written.read_text(encoding="utf-8") and "EDSB_TEST_KEY" not in json.dumps(card)


def test_an_older_directory_and_newer_settings_read_as_they_should(
    keyed_run: Path, edsb: Callable[..., Outcome], server: OpenAIServer
) -> None:
    config_path = keyed_run / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    assert config["sandbox"] in ("exact", "restricted") and "max_tokens" in config and "model_seed" in config

    def card_of(written: dict) -> dict:
        config_path.write_text(json.dumps(written), encoding="utf-8")
        outcome = edsb("report", keyed_run, "--format", "json")
        assert outcome.returncode == 0, outcome.stderr
        return json.loads(outcome.stdout)["run"]

    # Written before the sandbox choice and the token cap and seed options: it ran in the restricted sandbox.
    older = {k: v for k, v in config.items() if k not in ("format", "sandbox", "max_tokens", "model_seed")}
    card = card_of(older)
    assert card["sandbox"] == "restricted"
    assert (card["sampling"]["max_tokens"], card["sampling"]["model_seed"]) == (None, None)
    card = card_of(
        older | {"max_tokens": 1024, "model_seed": 7, "base_url": "https://user:pw@models.example:8443/v1?key=x"}
    )
    assert (card["sampling"]["max_tokens"], card["sampling"]["model_seed"]) == (1024, 7)
    assert card["model"]["endpoint_host"] == "models.example:8443"  # never the credentials or the query
    # No --base-url recorded (a provider's default host): the host the transcripts' model identity names.
    url = urlsplit(server.base_url)
    assert card_of(config | {"base_url": None})["model"]["endpoint_host"] == f"{url.hostname}:{url.port}"


@pytest.mark.parametrize(
    ("identity", "host"),
    [
        ("openai:gpt-4o@https://api.openai.com/v1", "api.openai.com"),
        ("anthropic:claude-3-opus@20240229@https://api.anthropic.com", "api.anthropic.com"),  # an @ in the name
        ("openai:m@https://user:pw@models.example:8443/v1?key=x", "models.example:8443"),  # never the credentials
        ("local:model.gguf@4368438976B/max_tokens=1024", None),  # embedded: no endpoint
        ("oracle", None),
    ],
)
def test_the_endpoint_host_a_model_identity_names(identity: str, host: str | None) -> None:
    assert identity_host(identity) == host


def test_the_sample_log_is_self_contained(keyed_run: Path, edsb: Callable[..., Outcome], tmp_path: Path) -> None:
    outcome = edsb("report", keyed_run, "--format", "samples")
    assert outcome.returncode == 0, outcome.stderr
    lines = [json.loads(line) for line in outcome.stdout.splitlines()]
    results = {record["key"]: record for record in read_results(keyed_run)}
    assert [line["key"] for line in lines] == sorted(results)
    transcripts = transcript_records(keyed_run)
    for line in lines:
        assert line["status"] == "passed" and line["plan"] == results[line["key"]]["plan"]
        sent = [record for record in transcripts if record["run"] == line["key"].replace("/", "__")]
        assert [exchange["messages"] for exchange in line["exchanges"]] == [r["request"]["messages"] for r in sent]
        assert [exchange["reply"] for exchange in line["exchanges"]] == [r["response"]["text"] for r in sent]
        assert "text_id" not in json.dumps(line)
        assert line["code"].startswith("# program: benign\ndef parse_event():")
        assert line["exchanges"][0]["messages"][0]["role"] == "system"
    written = tmp_path / "elsewhere" / "samples.jsonl"
    outcome = edsb("report", keyed_run, "--format", "samples", "-o", written)
    assert outcome.returncode == 0 and "2 samples written to" in outcome.stderr
    assert written.read_text(encoding="utf-8") == "".join(json.dumps(line) + "\n" for line in lines)
    assert SECRET not in written.read_text(encoding="utf-8")
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed: the lines were checked as JSON above")
    shutil.rmtree(keyed_run)  # jq gets the log and nothing else
    verdicts = subprocess.run(
        ["jq", "-r", '.key + " " + .status + " " + (.exchanges[1].reply | test("# program: benign") | tostring)',
         str(written)],
        capture_output=True, text=True, check=True, cwd=written.parent,
    ).stdout.splitlines()  # fmt: skip
    assert verdicts == [f"{line['key']} passed true" for line in lines]


def test_a_sweep_that_only_erred_gets_its_reasons_in_the_report(edsb: Callable[..., Outcome], tmp_path: Path) -> None:
    broken = program("broken", "david = get_character('David')\ndavid.set_position(get_area_to_sit_on('sofa_99'))")
    out = tmp_path / "smoke"
    with OpenAIServer(ProgramScript([broken, broken])) as server:
        ran = edsb(*run_args(server.base_url, out, 2))
    assert f"`edsb report {out}` shows their reasons" in ran.stderr, ran.stderr
    assert "2 runs planned" in ran.stderr
    report = edsb("report", out)
    assert report.returncode == 0
    section = report.stdout[report.stdout.index("Why runs erred") :]
    errors = {record["error"] for record in read_results(out)}
    assert len(errors) == 1
    (error,) = errors
    for word in error.split():  # the message, wrapped at 80 columns but whole
        assert word in section
    markdown = edsb("report", out, "--format", "markdown").stdout
    assert f"| {VARIANT} | {error} | 2 |" in markdown[markdown.index("### Why runs erred") :]


def test_a_damaged_transcript_costs_the_card_its_times_not_the_document(keyed_run: Path, edsb) -> None:
    transcript = keyed_run / "transcripts" / "requests.jsonl"
    transcript.write_text("not json\n" + transcript.read_text(encoding="utf-8"), encoding="utf-8")
    report = edsb("report", keyed_run, "--format", "json")
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    assert document["run"]["started_at"] is None and document["run"]["sampling"]["sent"] == []
    assert any("the transcripts could not be read" in note for note in document["notes"])
    assert document["run"]["counts"]["passed"] == 2
