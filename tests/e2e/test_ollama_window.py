"""Ollama cuts a prompt longer than its context window (4,096 tokens by default) without an error
(https://docs.ollama.com/context-length) and counts only what it kept in `usage.prompt_tokens`: the run says so in a
warning naming `OLLAMA_CONTEXT_LENGTH`, and says nothing when the whole prompt was counted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.edsb_cli import edsb_in_process, isolate_environment
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply

ONE_RUN = ("--cases", "13", "--distraction", "0", "--no-cache", "--max-retries", "0", "--quiet", "--concurrency", "1")


def counting(window: int | None) -> Callable[[RecordedRequest], Reply]:
    """Ollama's reply: the prompt counted whole (about four bytes a token), or cut to `window` tokens."""

    def reply(request: RecordedRequest) -> Reply:
        whole = len(request.body) // 4
        return Reply.completion("not a plan", prompt_tokens=whole if window is None else min(whole, window))

    return reply


@pytest.mark.parametrize(("window", "warned"), [(1024, True), (None, False)], ids=["cut", "whole"])
def test_a_prompt_cut_to_the_window_is_said(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    window: int | None,
    warned: bool,
) -> None:
    isolate_environment(monkeypatch, tmp_path / "cache")
    monkeypatch.chdir(tmp_path)
    with OpenAIServer(counting(window)) as server:
        run = edsb_in_process(
            ("run", "--model", "ollama:qwen3:8b", "--base-url", server.base_url, *ONE_RUN, "--out", "out"), capsys
        )
        longest = max(len(request.body) for request in server.requests)
    assert run.returncode == 0, run.stderr
    assert longest // 4 > 2 * 1024  # the benchmark's prompts are longer than the window of this test
    said = " ".join(run.stderr.split())  # the warning wraps to the terminal's width
    # Said when first seen, and again at the end of the sweep: once each.
    assert said.count("warning: the server counted 1,024 prompt tokens") == (2 if warned else 0), run.stderr
    assert said.count("OLLAMA_CONTEXT_LENGTH=32768") == (2 if warned else 0)
