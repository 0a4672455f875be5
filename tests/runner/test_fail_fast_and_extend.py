"""A newcomer's failure modes through the real CLI: a dead endpoint stops the sweep, incomplete runs make the exit
code non-zero, a directory resumes at a moved endpoint and grows, and Ctrl-C twice stops at once without a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from edsb.data.benchmark import Benchmark
from edsb.runner.loop import UNREACHABLE_STREAK
from tests.support.edsb_cli import (
    child_env,
    ctrl_c_twice,
    edsb_child,
    scripted_run_args,
    scripted_run_child,
    start_edsb,
)
from tests.support.network import closed_port
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.run_dir import records_by_key, transcript_records
from tests.support.scripted_planner import ScriptedPlanner

QUIET = ("--no-cache", "--quiet")


def test_a_dead_endpoint_stops_the_sweep_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    dead = f"http://127.0.0.1:{closed_port()}/v1"  # nothing listens there
    selection = ("--cases", "0-4", "--concurrency", "2", *QUIET)  # 15 runs
    result = scripted_run_child(dead, out, tmp_path / "cache", *selection)
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"edsb: error: stopped: {UNREACHABLE_STREAK} runs in a row could not connect")
    assert dead in error and "rerun the same command to resume" in error
    assert "Traceback" not in result.stderr
    records = records_by_key(out)
    assert len(records) == UNREACHABLE_STREAK, "the sweep stops at the streak; the other 12 runs are not recorded"
    assert {r["error_kind"] for r in records.values()} == {"transport_unreachable"}
    # The requests themselves gave up quickly: an endpoint that never answered gets only a few attempts.
    assert all("after 3 attempts" in r["error"] for r in records.values())


def test_incomplete_runs_make_the_exit_code_non_zero(tmp_path: Path) -> None:
    with OpenAIServer(lambda request: Reply.error(503, "overloaded")) as server:
        options = ("--cases", "13", "--distraction", "0", "--max-retries", "0", *QUIET)
        result = scripted_run_child(server.base_url, tmp_path / "run", tmp_path / "cache", *options)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"edsb: error: 1 run is incomplete (no answer from the model, or an edsb fault); see {tmp_path / 'run'}"
    )


def test_resume_at_a_moved_endpoint(benchmark: Benchmark, tmp_path: Path) -> None:
    out, cache = tmp_path / "run", tmp_path / "cache"
    selection = ("--cases", "13,60", "--distraction", "0", "--max-retries", "0", *QUIET)
    with OpenAIServer(lambda request: Reply.error(503, "outage")) as first:
        assert scripted_run_child(first.base_url, out, cache, *selection).returncode == 1
    assert {r["status"] for r in records_by_key(out).values()} == {"incomplete"}
    with OpenAIServer(ScriptedPlanner(benchmark)) as moved:
        result = scripted_run_child(moved.base_url, out, cache, *selection)
        assert result.returncode == 0, result.stderr
        assert f"note: endpoint changed from {first.base_url} to {moved.base_url}" in result.stderr
        assert "2 runs planned, 0 already done, 2 executed (0 incomplete" in result.stderr
        assert json.loads((out / "config.json").read_text())["base_url"] == moved.base_url
        assert {r["status"] for r in records_by_key(out).values()} <= {"passed", "failed", "error"}
    # The transcripts hold the model at two addresses; a replay of the directory still answers every request.
    command = ["run", "--model", f"replay:{out}", "--out", str(tmp_path / "replayed"), *selection]
    replay = edsb_child(command, env=child_env(cache))
    assert replay.returncode == 0, replay.stderr
    replayed = records_by_key(tmp_path / "replayed")
    assert {k: r["status"] for k, r in replayed.items()} == {k: r["status"] for k, r in records_by_key(out).items()}


def test_extending_a_directory_runs_only_the_new_runs(scripted_server: OpenAIServer, tmp_path: Path) -> None:
    out, cache = tmp_path / "run", tmp_path / "cache"
    selection = ("--cases", "13", "--distraction", "0", *QUIET)
    assert scripted_run_child(scripted_server.base_url, out, cache, *selection, "--repeats", "1").returncode == 0
    first = records_by_key(out)
    asked = len(scripted_server.chat_requests)
    first_transcript = transcript_records(out)

    result = scripted_run_child(scripted_server.base_url, out, cache, *selection, "--repeats", "3")
    assert result.returncode == 0, result.stderr
    assert "note: extending the run directory (repeats)" in result.stderr
    assert "3 runs planned, 1 already done, 2 executed" in result.stderr
    records = records_by_key(out)  # no key twice, the first run untouched
    assert sorted(records) == ["ours/tc13-d0-r0", "ours/tc13-d0-r1", "ours/tc13-d0-r2"]
    assert records["ours/tc13-d0-r0"] == first["ours/tc13-d0-r0"]
    # Only the new repeats asked the model: the first run's records are untouched, the new ones hold every request.
    transcripts = transcript_records(out)
    assert [t for t in transcripts if t["run"] == "ours__tc13-d0-r0"] == first_transcript
    new_records = [t for t in transcripts if t["run"] in {"ours__tc13-d0-r1", "ours__tc13-d0-r2"}]
    assert len(transcripts) == len(first_transcript) + len(new_records)
    assert len(scripted_server.chat_requests) - asked == len(new_records) > 0

    # A different case and level join too; the summary covers everything the directory holds.
    result = scripted_run_child(scripted_server.base_url, out, cache, "--cases", "60", "--distraction", "0", *QUIET)
    assert result.returncode == 0, result.stderr
    config = json.loads((out / "config.json").read_text())
    assert (config["cases"], config["distraction"], config["repeats"]) == ([13, 60], [0], 3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["runs_planned"] == 4
    assert summary["variants"]["ours"]["cells"]["Total"]["Total"]["runs"] == 4

    # The identity of the run may not change.
    refused = scripted_run_child(scripted_server.base_url, out, cache, *selection, "--temperature", "0.7")
    assert refused.returncode == 2
    assert "temperature was 0.1, now 0.7" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_ctrl_c_twice_stops_at_once_without_a_traceback(benchmark: Benchmark, tmp_path: Path) -> None:
    out, log = tmp_path / "run", tmp_path / "stderr.txt"
    with OpenAIServer(ScriptedPlanner(benchmark, delay_s=2.0)) as server, log.open("w") as stderr:
        command = scripted_run_args(server.base_url, out, "--cases", "0-4", "--concurrency", "2", *QUIET)
        process = start_edsb(command, env=child_env(tmp_path / "cache"), stdout=subprocess.DEVNULL, stderr=stderr)
        ctrl_c_twice(process, lambda: len(server.chat_requests) >= 2, log.read_text, timeout=30)
    text = log.read_text()
    assert process.returncode == 130
    assert "finishing in-flight requests; Ctrl-C again to stop now" in text
    assert "stopped: 0 of 15 results kept in" in text
    assert "Traceback" not in text


def test_a_replay_miss_stops_the_replay_with_one_line(scripted_server: OpenAIServer, tmp_path: Path) -> None:
    recorded, cache = tmp_path / "recorded", tmp_path / "cache"
    selection = ("--cases", "13", "--distraction", "0", *QUIET)
    recording = scripted_run_child(scripted_server.base_url, recorded, cache, *selection)
    assert recording.returncode == 0, recording.stderr
    out = tmp_path / "replayed"
    command = ["run", "--model", f"replay:{recorded}", "--out", str(out), "--concurrency", "1", *QUIET]
    # Case 60 was never recorded: refused before anything runs, by name.
    result = edsb_child([*command, "--cases", "13,60", "--distraction", "0"], env=child_env(cache))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [f"edsb: error: 1 of the 2 runs asked for is not recorded in {recorded} (ours/tc60-d0-r0); it "
                     "holds ours/tc13-d0-r0: replay the runs it recorded (the same --variant, --cases, --distraction "
                     "and --repeats)"]  # fmt: skip
    assert not out.exists()
    # Case 13 at another temperature: its requests were never sent, so the replay stops at the first one.
    result = edsb_child([*command, *selection, "--temperature", "0.5"], env=child_env(cache))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edsb: error: replay stopped: a request is not recorded in")
    assert "the options differ" in lines[0]
    assert records_by_key(out) == {}  # nothing was filed as an internal error or as the model's failure
