"""Shared pieces of the runner tests: the real data dir, a scripted loopback model, helpers to read run directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.results.rundir import RESULTS_FILE
from tests.runner.scripted_model import ScriptedPlanner
from tests.support.data import DATA as DATA_DIR
from tests.support.openai_server import OpenAIServer

DATA = str(DATA_DIR)
ROOT = Path(__file__).resolve().parents[2]
TIMING_FIELDS = ("latency_s", "wall_s")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own response cache, so the user's cache is never read or written."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("EDSB_CACHE_DIR", str(directory))
    monkeypatch.setenv("EDSB_DATA", DATA)
    return directory


@pytest.fixture
def scripted_server(benchmark: Benchmark) -> Iterator[OpenAIServer]:
    """A loopback server whose answers depend on the request body only (see `ScriptedPlanner`)."""
    with OpenAIServer(ScriptedPlanner(benchmark)) as server:
        yield server


def raw_lines(run_dir: Path) -> list[bytes]:
    path = run_dir / RESULTS_FILE
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def records_by_key(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every line of results.jsonl, parsed; fails on a torn line or a key seen twice."""
    records: dict[str, dict[str, Any]] = {}
    for line in raw_lines(run_dir):
        assert line.endswith(b"\n"), f"torn line {line[:80]!r}"
        record = json.loads(line)
        assert record["key"] not in records, f"{record['key']} appears twice"
        records[record["key"]] = record
    return records


def content(record: dict[str, Any]) -> dict[str, Any]:
    """What a run produced, without the timings that vary from pass to pass."""
    return {name: value for name, value in record.items() if name not in TIMING_FIELDS}


def cli_command(server: OpenAIServer, out: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "edsb",
        "run",
        "--model",
        "openai:scripted",
        "--base-url",
        server.base_url,
        "--out",
        str(out),
        *options,
    ]


def cli_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "EDSB_DATA": DATA, "EDSB_CACHE_DIR": str(cache_dir), **extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def run_cli(server: OpenAIServer, out: Path, cache_dir: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(server, out, *options), env=cli_env(cache_dir), capture_output=True, text=True, timeout=120
    )
