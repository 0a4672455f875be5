"""The quick start's smoke selection (case 13 at levels 0-2, case 60) through `edsb run` with every provider, each
against the loopback server speaking its wire protocol and answered by the same scripted model: every provider
must reach the same verdicts as `openai:`, and its transcripts must say what was sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.llm import read_transcripts
from tests.support.data import DATA
from tests.support.edsb_cli import run_edsb
from tests.support.openai_server import OpenAIServer
from tests.support.run_dir import records_by_key
from tests.support.scripted_planner import ScriptedPlanner

SMOKE = ("--cases", "13,60", "--distraction", "0-2", "--repeats", "1")
KEYS = {
    "openai": "OPENAI_API_KEY",
    "deepinfra": "DEEPINFRA_API_TOKEN",
    "groq": "GROQ_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "lepton": "LEPTON_API_TOKEN",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}
SDK = ("anthropic", "google")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDSB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EDSB_DATA", str(DATA))
    for provider, variable in KEYS.items():
        monkeypatch.setenv(variable, f"key-for-{provider}")


def verdicts(out: Path) -> dict[str, tuple[Any, ...]]:
    """Each run's status, error kind and failure reason: what the report counts."""
    return {
        key: (record["status"], record.get("error_kind"), record.get("reason"))
        for key, record in records_by_key(out).items()
    }


def smoke(provider: str, server: OpenAIServer, out: Path) -> int:
    url = server.root_url if provider in SDK else server.base_url
    model = f"{provider}:scripted-model"
    return run_edsb("run", "--model", model, "--base-url", url, "--out", out, *SMOKE, "--max-retries", "0", "--quiet")


@pytest.fixture(scope="module")
def reference_verdicts(benchmark: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, ...]]:
    out = tmp_path_factory.mktemp("openai") / "run"
    with pytest.MonkeyPatch.context() as patch, OpenAIServer(ScriptedPlanner(benchmark)) as server:
        patch.setenv("EDSB_CACHE_DIR", str(out.parent / "cache"))
        patch.setenv("OPENAI_API_KEY", "key-for-openai")
        assert smoke("openai", server, out) == 0
    found = verdicts(out)
    assert len(found) == 4
    assert {status for status, *_ in found.values()} == {"passed", "failed", "error"}  # a mix to agree on
    return found


@pytest.mark.parametrize("provider", [name for name in KEYS if name != "openai"])
def test_every_provider_reaches_openais_verdicts_on_the_same_answers(
    benchmark: Benchmark, tmp_path: Path, provider: str, reference_verdicts: dict[str, tuple[Any, ...]]
) -> None:
    out = tmp_path / "run"
    with OpenAIServer(ScriptedPlanner(benchmark)) as server:
        assert smoke(provider, server, out) == 0
        native = server.native_requests if provider in SDK else server.chat_requests
    assert native, "the provider's own protocol was not spoken"
    assert verdicts(out) == reference_verdicts
    records = read_transcripts(out)
    assert records and {record.model.partition(":")[0] for record in records} == {provider}
    cap = 2048 if provider in SDK else None  # the reference's setting, as sent and as recorded
    assert {record.request.max_tokens for record in records} == {cap}
    for request in native:  # the fields the reference's client sends, and no other
        body = request.json()
        sent = body.get("max_tokens", (body.get("generationConfig") or {}).get("maxOutputTokens"))
        assert sent == cap
        if provider == "anthropic":  # the installed SDK's API version (2026-10-21) has no temperature
            assert set(body) == {"model", "system", "messages", "max_tokens"}
        elif provider == "google":
            assert set(body) == {"contents", "systemInstruction", "generationConfig"}
            assert set(body["generationConfig"]) <= {"temperature", "maxOutputTokens", "responseMimeType"}
        else:
            assert set(body) <= {"model", "messages", "temperature", "response_format"}
        if provider != "anthropic":
            assert 0.1 in (body.get("temperature"), (body.get("generationConfig") or {}).get("temperature"))
        assert f"key-for-{provider}".encode() not in request.body
    for file in out.rglob("*"):  # the key went in a header only: no file of the run holds it
        if file.is_file():
            assert f"key-for-{provider}" not in file.read_text(encoding="utf-8", errors="replace"), file
