"""Running `edsb` commands in-process and checking that a failure is one clear line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.data import require_data, writable_copy
from tests.support.edsb_cli import Outcome, edsb_in_process, isolate_environment
from tests.support.openai_server import OpenAIServer
from tests.support.scripted_programs import BENIGN_BODY, ProgramScript, program, run_args

RUNS = 3


@pytest.fixture
def edsb(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Outcome]:
    """`edsb(*args) -> Outcome`, with the official data, a private cache and no ambient OpenAI settings."""
    require_data()
    isolate_environment(monkeypatch, tmp_path / "cache")
    monkeypatch.chdir(tmp_path)

    def run(*args: str | Path) -> Outcome:
        return edsb_in_process(args, capsys)

    return run


@pytest.fixture
def damaged_data(tmp_path: Path) -> Callable[[Callable[[Path], None]], Path]:
    """`damaged_data(damage) -> Path`: a private copy of the data with case 13's file rewritten by `damage`."""

    def make(damage: Callable[[Path], None]) -> Path:
        target = writable_copy(tmp_path / "damaged-data")
        damage(target / "benchmark" / "test_cases" / "1_RC" / "testcase_13.json")
        return target

    return make


def rewrite_case(**changes: object) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        case = json.loads(path.read_text())
        case.update(changes)
        path.write_text(json.dumps(case))

    return damage


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(ProgramScript([program("benign", BENIGN_BODY)] * 20)) as server:
        yield server


@pytest.fixture
def finished(edsb: Callable[..., Outcome], server: OpenAIServer, tmp_path: Path) -> tuple[Path, list[str]]:
    """A run directory holding RUNS passed runs, and the command that made it."""
    out = tmp_path / "run"
    args = run_args(server.base_url, out, RUNS, "--concurrency", "1")
    assert edsb(*args).returncode == 0
    return out, args
