"""Running `edsb` commands in-process and checking that a failure is one clear line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from edsb.cli import main
from tests.security.scripted import BENIGN_BODY, ScriptedModel, program, run_args
from tests.support.data import DATA
from tests.support.openai_server import OpenAIServer

RUNS = 3


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    def assert_one_clear_error(self, code: int | None = None, *, contains: str = "") -> None:
        """Exit code ≠ 0 (or exactly `code`), one `edsb: error:` line on stderr, no traceback."""
        assert self.code != 0 if code is None else self.code == code, (self.code, self.err)
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, self.err
        assert lines[0].startswith("edsb: error: "), self.err
        assert "Traceback" not in self.err + self.out
        assert contains in lines[0], (contains, lines[0])


@pytest.fixture
def edsb(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """`edsb(*args) -> Outcome`, with the official data, a private cache and no ambient OpenAI settings."""
    if not DATA.is_dir():
        pytest.fail(f"benchmark data not found at {DATA} (set EDSB_DATA)")
    monkeypatch.setenv("EDSB_DATA", str(DATA))
    monkeypatch.setenv("EDSB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Outcome:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main([str(arg) for arg in args])
        captured = capsys.readouterr()
        code = exit_info.value.code
        return Outcome(0 if code is None else code if isinstance(code, int) else 1, captured.out, captured.err)

    return run


@pytest.fixture
def damaged_data(tmp_path: Path):
    """`damaged_data(damage) -> Path`: a private copy of the data with case 13's file rewritten by `damage`."""

    def make(damage) -> Path:
        target = tmp_path / "damaged-data"
        shutil.copytree(DATA, target)
        for path in target.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        case_file = target / "benchmark" / "test_cases" / "1_RC" / "testcase_13.json"
        damage(case_file)
        return target

    return make


def rewrite_case(**changes: object):
    def damage(path: Path) -> None:
        case = json.loads(path.read_text())
        case.update(changes)
        path.write_text(json.dumps(case))

    return damage


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(ScriptedModel([program("benign", BENIGN_BODY)] * 20)) as server:
        yield server


@pytest.fixture
def finished(edsb, server: OpenAIServer, tmp_path: Path) -> tuple[Path, list[str]]:
    """A run directory holding RUNS passed runs, and the command that made it."""
    out = tmp_path / "run"
    args = run_args(server.base_url, out, RUNS, "--concurrency", "1")
    assert edsb(*args).code == 0
    return out, args
