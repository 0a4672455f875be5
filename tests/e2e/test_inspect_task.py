"""The benchmark as an Inspect AI task: the same scripted answers, served by the loopback server, must get the same
verdict, error kind, message and plan run by run under `inspect_ai.eval` as under `edsb run`, and the Inspect log
read back from disk must carry each run's explanation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, read_eval_log

from edsb.data.benchmark import Benchmark
from edsb.errors import UsageError
from edsb.inspect_tasks.tasks import edsb_table1, edsb_table2
from tests.support.data import DATA
from tests.support.edsb_cli import SAMPLER_SECRET, child_env, isolate_environment, run_edsb
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.provider_fakes import provider_rules
from tests.support.run_dir import read_results
from tests.support.scripted_stories import StoryModel, closest_table_answer, prose_narration, seat_answer

# Every kind of outcome, each on its own case: an execution error in the sandbox (0), a plan judged false (13), a
# null plan that passes (21), prose where the Narrator must answer JSON (44), a PI seat the sampler cannot find (60),
# and a PI plan whose sampled point passes (63).
MISTAKES = {
    ("event_parser", 0): closest_table_answer,
    ("event_parser", 13): seat_answer("chair_3", "chair_3 is a free chair."),
    ("narrator", 44): prose_narration,
    ("event_parser", 60): seat_answer("chair_99", "chair_99 is free."),
}
OUTCOMES = {
    0: ("error", "code_runtime"),
    13: ("failed", None),
    21: ("passed", None),
    44: ("error", "narrator_format"),
    60: ("error", "sampler_anchor"),
    63: ("passed", None),
}
REPEATS = 2
ROUTE, ROUTE_KEY = "openai-api/loopback/scripted", "LOOPBACK_API_KEY"  # Inspect's provider for any such server


@dataclass(frozen=True)
class Setting:
    """One grid, run once by `edsb run` and once by the matching Inspect task."""

    name: str
    variant: str
    cases: str
    levels: str

    def cli_args(self) -> list[str]:
        return ["--variant", self.variant, "--cases", self.cases, "--distraction", self.levels]


SETTINGS = (Setting("table1", "ours", "0,13,21,44", "0-1"), Setting("table2", "scene-graph", "60,63", "0"))
TASKS = {"table1": edsb_table1, "table2": edsb_table2}


@dataclass
class BothRuns:
    edsb: dict[str, dict[str, Any]]  # results.jsonl records by run key, both settings
    logs: dict[str, EvalLog]  # the Inspect log of each setting, read back from disk


def inspect_runs(log: EvalLog) -> dict[str, dict[str, Any]]:
    """What the Inspect log says about each run, keyed like results.jsonl."""
    runs = {}
    for sample in log.samples or []:
        assert sample.error is None, sample.error.message
        (score,) = sample.scores.values()
        # the record's notes of what was repaired or cut reach the log too
        assert (score.metadata["surrogates_replaced"], score.metadata["truncated"]) == ([], [])
        runs[score.metadata["key"]] = {
            "status": score.metadata["status"],
            "error_kind": score.metadata["error_kind"],
            "error": score.metadata["error"],
            "plan": json.loads(score.answer),
            "value": score.value,
            "explanation": score.explanation,
            "epoch": sample.epoch,
            "sample": sample.id,
        }
    return runs


@pytest.fixture(scope="module")
def both(benchmark: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BothRuns]:
    root = tmp_path_factory.mktemp("inspect")
    model = StoryModel(benchmark.cases, answers=dict(MISTAKES))
    records: dict[str, dict[str, Any]] = {}
    logs = {}
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, root / "cache")
        with OpenAIServer(model) as server:
            for setting in SETTINGS:
                out = root / setting.name
                code = run_edsb(
                    "run", "--model", "openai:scripted", "--base-url", server.base_url, *setting.cli_args(),
                    "--repeats", str(REPEATS), "--max-retries", "0", "--quiet", "--out", str(out),
                    "--sampler-secret", SAMPLER_SECRET,
                )  # fmt: skip
                assert code == 0
                records.update((r["key"], r) for r in read_results(out))
            monkeypatch.setenv(ROUTE_KEY, "not-a-secret")
            for setting in SETTINGS:
                task = TASKS[setting.name](
                    variant=setting.variant, cases=setting.cases, levels=setting.levels, sampler_secret=SAMPLER_SECRET
                )
                (log,) = inspect_eval(
                    task,
                    model=ROUTE,  # docs/inspect.md's route for OpenAI-compatible servers
                    model_base_url=server.base_url,  # a new base URL is a new Inspect model (they are cached)
                    epochs=REPEATS,
                    log_dir=str(root / "logs"),
                    display="none",
                    max_retries=0,
                )
                assert log.status == "success", log.error
                logs[setting.name] = read_eval_log(log.location)
    yield BothRuns(records, logs)


def test_every_run_gets_the_same_verdict_as_edsb_run(both: BothRuns) -> None:
    inspected = {key: run for log in both.logs.values() for key, run in inspect_runs(log).items()}
    assert sorted(inspected) == sorted(both.edsb)
    compared = ("status", "error_kind", "error", "plan")
    assert {k: {f: r[f] for f in compared} for k, r in inspected.items()} == {
        k: {f: r[f] for f in compared} for k, r in both.edsb.items()
    }
    # The scripted answers do reach every kind of outcome (the comparison is not between two empty sets).
    assert {(r["case"], r["status"], r["error_kind"]) for r in both.edsb.values()} == {
        (case, status, kind) for case, (status, kind) in OUTCOMES.items()
    }
    for key, run in inspected.items():
        record = both.edsb[key]
        assert run["value"] == {"success": float(record["passed"]), "execution": float(record["status"] != "error")}
        assert run["epoch"] == record["repeat"] + 1
        assert run["sample"] == f"tc{record['case']:02d}-d{record['distraction']}"


def test_the_log_explains_each_run(both: BothRuns) -> None:
    runs = [run for log in both.logs.values() for run in inspect_runs(log).values()]
    for run in runs:
        assert run["explanation"].startswith(run["status"] if run["status"] != "error" else "execution error")
        if run["error_kind"]:
            assert run["error_kind"] in run["explanation"]
    messages = {run["error_kind"]: run["explanation"] for run in runs if run["error_kind"]}
    assert "KeyError: 'table_99'" in messages["code_runtime"]
    assert "not valid JSON" in messages["narrator_format"]
    assert "chair_99" in messages["sampler_anchor"]


def rate(records: list[dict[str, Any]], score: str) -> float:
    """Fraction of runs that passed (`success`) or ran without an execution error (`execution`)."""
    hits = [r["passed"] if score == "success" else r["status"] != "error" for r in records]
    return sum(hits) / len(hits)


def test_metrics_group_runs_by_tag_and_level_as_edsb_does(both: BothRuns) -> None:
    for name, log in both.logs.items():
        records = [r for r in both.edsb.values() if r["variant"] == log.eval.task_args["variant"]]
        assert records, name
        assert log.results is not None
        scores = {score.name: score.metrics for score in log.results.scores}
        groups: dict[str, list[dict[str, Any]]] = {"Total": records}
        for record in records:
            for tag in record["tags"]:
                groups.setdefault(tag, []).append(record)
            groups.setdefault(f"d{record['distraction']}", []).append(record)
        for score in ("success", "execution"):
            reported = {metric.name: metric.value for metric in scores[score].values()}
            assert reported == pytest.approx({group: rate(rs, score) for group, rs in groups.items()})


def test_bad_task_parameters_fail_in_one_line() -> None:
    with pytest.raises(UsageError, match="unknown variant 'nope'"):
        edsb_table1(variant="nope")
    with pytest.raises(UsageError, match="unknown case id 99"):
        edsb_table2(cases=99)
    with pytest.raises(UsageError, match="unknown sampler 'best' \\(choose reference, optimal\\)"):
        edsb_table2(sampler="best")
    with pytest.raises(UsageError, match="unknown sandbox 'best' \\(choose auto, exact, restricted\\)"):
        edsb_table1(sandbox="best")
    # a misspelt name is suggested from the task's own parameters as from the settings
    with pytest.raises(UsageError, match="unknown task parameter 'epoch' \\(did you mean 'epochs'\\?\\)"):
        edsb_table1(epoch=1)
    with pytest.raises(UsageError, match="unknown task parameter 'temprature' \\(did you mean 'temperature'\\?\\)"):
        edsb_table2(temprature=0)


def test_a_misspelt_parameter_is_one_line_under_inspect_eval(tmp_path: Path) -> None:
    """The command a user types: Inspect prints the error alone, not under its traceback."""
    inspect = Path(sys.executable).with_name("inspect")
    command = [str(inspect), "eval", "edsb/edsb_table1", "-T", "levls=0", "--model", "edsb/oracle"]
    env = child_env(tmp_path / "cache", INSPECT_LOG_DIR=str(tmp_path / "logs"))
    del env["PYTHONPATH"]  # the installed edsb: Inspect names no `edsb/...` task from a source tree on the path
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    assert (done.stdout + done.stderr).strip() == "unknown task parameter 'levls' (did you mean 'levels'?)"


def test_the_sandbox_parameter_reaches_the_pipeline(
    benchmark: Benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-T sandbox=restricted`: the task records it, and every sample's verdict says that sandbox ran its code."""
    isolate_environment(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv(ROUTE_KEY, "not-a-secret")
    with OpenAIServer(StoryModel(benchmark.cases)) as server:
        (log,) = inspect_eval(
            edsb_table1(cases=13, levels=0, sandbox="restricted"),
            model=ROUTE,
            model_base_url=server.base_url,
            epochs=1,
            log_dir=str(tmp_path / "logs"),
            display="none",
            max_retries=0,
        )
    log = read_eval_log(log.location)
    assert log.eval.task_args["sandbox"] == "restricted" and log.eval.metadata["sandbox"] == "restricted"
    samples = log.samples or []
    assert samples and all(next(iter(s.scores.values())).metadata["sandbox"] == "restricted" for s in samples)


def test_the_sampler_parameter_reaches_the_pipeline(
    benchmark: Benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # case 63 (in front of two couches), three repeats: each sampler places the points as `edsb run --sampler` does
    isolate_environment(monkeypatch, tmp_path / "cache")
    plans: dict[str, dict[str, Any]] = {}
    with OpenAIServer(StoryModel(benchmark.cases)) as server:
        for sampler in ("reference", "optimal"):
            out = tmp_path / sampler
            code = run_edsb(
                "run", "--model", "openai:scripted", "--base-url", server.base_url, "--variant", "scene-graph",
                "--cases", "63", "--repeats", "3", "--sampler", sampler, "--max-retries", "0", "--quiet",
                "--out", str(out), "--sampler-secret", SAMPLER_SECRET,
            )  # fmt: skip
            assert code == 0
            plans[sampler] = {r["key"]: r["plan"] for r in read_results(out)}
            monkeypatch.setenv(ROUTE_KEY, "not-a-secret")
            (log,) = inspect_eval(
                edsb_table2(cases=63, sampler=sampler, sampler_secret=SAMPLER_SECRET),
                model=ROUTE,
                model_base_url=server.base_url,
                epochs=3,
                log_dir=str(tmp_path / "logs"),
                display="none",
                max_retries=0,
            )
            log = read_eval_log(log.location)
            assert log.eval.task_args["sampler"] == sampler
            assert {key: run["plan"] for key, run in inspect_runs(log).items()} == plans[sampler]
    assert len(plans["reference"]) == 3
    assert plans["reference"] != plans["optimal"]


def test_cases_and_levels_accept_what_inspect_passes(benchmark: Benchmark) -> None:
    # `-T cases=13` arrives as an int, `-T cases=[13,44]` as a list, `-T levels=0-1` as text.
    assert [s.id for s in edsb_table1(cases=13, levels=0, epochs=1).dataset] == ["tc13-d0"]
    ids = [s.id for s in edsb_table1(cases=[13, 44], levels="0-1", epochs=1).dataset]
    assert sorted(ids) == ["tc13-d0", "tc13-d1", "tc44-d0", "tc44-d1"]
    sample = edsb_table1(cases="44", levels=[1]).dataset[0]
    assert sample.metadata == {
        "case": 44,
        "level": 1,
        "tags": list(benchmark.case(44).tags),
        "scene": benchmark.case(44).scene_name,
        "variant": "ours",
    }


def eval_on(server: OpenAIServer, task: Any, tmp_path: Path, **options: Any) -> EvalLog:
    """One Inspect eval of `task` against the loopback server, read back from its log on disk."""
    (log,) = inspect_eval(
        task,
        model=ROUTE,
        model_base_url=server.base_url,
        log_dir=str(tmp_path / "logs"),
        display="none",
        max_retries=0,
        **options,
    )
    return read_eval_log(log.location)


def run_one(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, exit_code: int = 0
) -> tuple[dict[str, Any], EvalLog]:
    """Case 13 at level 0 once through `edsb run` (which must exit with `exit_code`) and once through Inspect,
    against the same server."""
    out = tmp_path / "run"
    args = ("--model", "openai:scripted", "--base-url", server.base_url, "--cases", "13", "--distraction", "0")
    assert run_edsb("run", *args, "--max-retries", "0", "--quiet", "--out", str(out)) == exit_code
    (record,) = read_results(out)
    monkeypatch.setenv(ROUTE_KEY, "not-a-secret")
    return record, eval_on(server, edsb_table1(cases=13, levels=0, epochs=1), tmp_path, fail_on_error=False)


def test_a_prompt_the_endpoint_refuses_is_the_same_execution_error(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    too_long = {"message": "maximum context length exceeded", "type": "invalid_request_error"}
    openai_server.handler = lambda request: Reply.json(
        {"error": {**too_long, "param": None, "code": "context_length_exceeded"}}, status=400
    )
    record, log = run_one(openai_server, tmp_path, monkeypatch)
    assert (record["status"], record["error_kind"]) == ("error", "request_rejected")
    (run,) = inspect_runs(log).values()
    assert (run["status"], run["error_kind"]) == ("error", "request_rejected")
    assert "maximum context length exceeded" in run["explanation"]


def test_a_model_that_never_answers_is_a_sample_error_not_a_verdict(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_server.handler = lambda request: Reply.error(503, "overloaded")
    record, log = run_one(openai_server, tmp_path, monkeypatch, exit_code=1)  # an incomplete run exits non-zero
    assert (record["status"], record["error_kind"]) == ("incomplete", "transport_http")
    (sample,) = log.samples or []
    assert sample.error is not None and "InternalServerError" in sample.error.message  # the 503, as Inspect saw it
    assert not sample.scores  # neither a pass nor an execution error: Inspect retries or reports it


def test_a_provider_that_drops_the_system_message_and_temperature_fails_the_sample_loudly(
    benchmark: Benchmark, openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inspect's `openai` provider takes a model name it does not know for a reasoning model: it sends the system
    message as role `developer` and leaves the temperature out. Such a run is not the benchmark's; it must not be
    scored."""
    openai_server.handler = StoryModel(benchmark.cases)
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    (log,) = inspect_eval(
        edsb_table1(cases=13, levels=0, epochs=1),
        model="openai/scripted",
        model_base_url=openai_server.base_url,
        model_args={"responses_api": False},
        log_dir=str(tmp_path / "logs"),
        display="none",
        max_retries=0,
        fail_on_error=False,
    )
    body = openai_server.chat_requests[0].json()
    assert body["messages"][0]["role"] == "developer" and "temperature" not in body  # what Inspect sent
    (sample,) = read_eval_log(log.location).samples or []
    assert sample.error is not None and not sample.scores
    message = sample.error.message
    assert "RequestAltered" in message or "changed edsb's request" in message
    assert "the system message went out as role developer and temperature 0.1 was dropped" in message
    assert "openai-api/<service>/<model>" in message


def test_a_perturbed_task_runs_the_renamed_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-T perturb=2`: the samples are the renamed cases, and a server answering as the oracle told that mapping
    passes every one of them through Inspect, as `edsb run --perturb 2` does."""
    from edsb.data.perturb import case_character_names
    from edsb.llm import ChatRequest
    from edsb.llm.oracle import OracleChatModel

    oracle = OracleChatModel(DATA, perturb=2)

    def answer(request: Any) -> Reply:
        body = request.json()
        json_mode = (body.get("response_format") or {}).get("type") == "json_object"
        chat = ChatRequest(messages=body["messages"], temperature=body["temperature"], json_mode=json_mode)
        return Reply.completion(oracle.reply(chat))

    task = edsb_table1(cases="0,13,21,44", levels="0-1", epochs=1, perturb=2)
    plain = edsb_table1(cases="0,13,21,44", levels="0-1", epochs=1)
    assert task.metadata is not None and task.metadata["perturbation"] == "perturbed (seed 2)"
    original = Benchmark.open(DATA)
    for sample, unperturbed in zip(task.dataset, plain.dataset, strict=True):
        assert sample.id == unperturbed.id and sample.input != unperturbed.input
        names = case_character_names(original.case(sample.metadata["case"]))  # type: ignore[index]
        assert not any(name in str(sample.input) or name in str(sample.target) for name in names)
    isolate_environment(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv(ROUTE_KEY, "not-a-secret")
    with OpenAIServer(answer) as server:
        runs = inspect_runs(eval_on(server, task, tmp_path))
    assert len(runs) == 8 and {run["status"] for run in runs.values()} == {"passed"}


def test_a_responses_only_model_runs_through_openais_own_provider(
    benchmark: Benchmark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--model openai/o3-pro -T temperature=default`: Inspect's own OpenAI provider sends o3-pro to the Responses
    API, the system prompt as role `developer` (as OpenAI documents for its reasoning models) and no JSON mode (it
    passes no `response_format` there, which that API refuses). The guard takes `developer` for the system prompt
    there, and every sample is scored."""
    isolate_environment(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-secret")
    with OpenAIServer(StoryModel(benchmark.cases), validator=provider_rules) as server:
        (log,) = inspect_eval(
            edsb_table1(cases="13,21", levels=0, epochs=1, temperature="default"),
            model="openai/o3-pro",
            model_base_url=server.base_url,
            log_dir=str(tmp_path / "logs"),
            display="none",
            max_retries=0,
        )
        paths = {request.path for request in server.requests}
        # the benchmark's requests (Inspect first probes the model with a bare string)
        bodies = [body for request in server.requests if isinstance((body := request.json())["input"], list)]
    assert paths == {"/v1/responses"} and len(bodies) >= 3
    assert all(body["input"][0]["role"] == "developer" and "temperature" not in body for body in bodies)
    assert not any("response_format" in body for body in bodies)
    assert log.status == "success", log.error
    runs = inspect_runs(read_eval_log(log.location))
    assert {run["status"] for run in runs.values()} == {"passed"} and len(runs) == 2
