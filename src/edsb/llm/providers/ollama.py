"""Ollama on the user's own machine: OpenAI's chat completions API, no key at its default host, and a context window
that cuts a longer prompt without an error (https://docs.ollama.com/context-length), which edsb notices from the
prompt tokens the server counted (`window_note`)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from edsb.llm.providers.base import Provider

OLLAMA_PORT = 11434
# Roughly how many bytes of a request body make one prompt token (English prose and code; JSON adds a little); a
# count below `WINDOW_SHARE` of that estimate is a prompt cut short, for a prompt of `WINDOW_FLOOR` tokens or more
# (no context window is smaller).
BYTES_PER_TOKEN = 4
WINDOW_SHARE = 0.6
WINDOW_FLOOR = 2048


def at_ollama_port(base_url: str) -> bool:
    """A server at Ollama's port, whatever the provider's name (`openai:` with `--base-url`)."""
    return urlsplit(base_url).port == OLLAMA_PORT


def window_note(counted: int, body_bytes: int) -> str | None:
    """What to tell the user when the server counted far fewer prompt tokens than the request holds: Ollama cuts a
    prompt to its context window (4,096 tokens by default below 24 GiB of GPU memory) without an error, so the model
    never saw the whole prompt."""
    estimate = body_bytes // BYTES_PER_TOKEN
    if counted <= 0 or estimate < WINDOW_FLOOR or counted >= WINDOW_SHARE * estimate:
        return None
    return (
        f"the server counted {counted:,} prompt tokens where about {estimate:,} were sent: Ollama cuts a prompt to "
        "its context window without an error, so the model did not see all of it; restart the server with a larger "
        "window, e.g. OLLAMA_CONTEXT_LENGTH=32768 ollama serve"
    )


@dataclass(frozen=True)
class Ollama(Provider):
    def cut_note(self, base_url: str, counted: int, body_bytes: int) -> str | None:
        return window_note(counted, body_bytes)


ROW = Ollama("ollama", "openai", "OLLAMA_API_KEY", "http://localhost:11434/v1", keyless=True)
