"""A reply split into the model's reasoning and its answer, whatever shape the server gave them.

Reasoning models write their reasoning where a parser would take it for the answer: an inline `<think>…</think>`
block (or only `…</think>` when the chat template opened the block inside the prompt), separate message fields
(`reasoning_content` from DeepSeek, vLLM and SGLang; `reasoning` from vLLM and Ollama; `reasoning_details` from
OpenRouter), content given as a list of parts (Mistral's `thinking` parts), Anthropic's thinking blocks and Gemini's
thought parts. The Narrator's JSON and the Event Parser's code are read from the answer only, so a draft code block in
the reasoning is never run. A reply without any of these is returned as it is, byte for byte.

A shape edsb does not read is never a crash: its parts are left out of the answer (so a reply that is nothing else
fails as the model's own format error) and `Split.source` says what could not be read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from edsb.text import truncate

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# The reasoning kept with a response (transcripts, cache, sample log): long enough for any useful reading of it,
# bounded like every other text a server sends.
REASONING_CHARS = 100_000
REDACTED = "[redacted thinking]"


@dataclass
class Split:
    """An answer and the reasoning taken off it. `source` names where the reasoning came from (None: the reply had
    none), and says `unreadable: ...` for a part or field edsb could not read."""

    answer: str
    reasoning: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def add(self, text: str, source: str) -> None:
        if text:
            self.reasoning.append(text)
        if source not in self.sources:
            self.sources.append(source)

    @property
    def source(self) -> str | None:
        return ", ".join(self.sources) or None

    def fields(self) -> dict[str, Any]:
        """The `ChatResponse` fields of the split: `text`, `reasoning` (bounded) and `reasoning_source`."""
        reasoning = "\n\n".join(self.reasoning)
        return {"text": self.answer, "reasoning": truncate(reasoning, REASONING_CHARS), "reasoning_source": self.source}


def split_think(text: str) -> Split:
    """The answer after the last `</think>`, the reasoning before it (a leading `<think>` removed); a reply that
    opens `<think>` and never closes it is all reasoning (cut while thinking). Anything else is all answer."""
    close = text.rfind(THINK_CLOSE)
    if close >= 0:
        reasoning = text[:close].strip()
        if reasoning.startswith(THINK_OPEN):
            reasoning = reasoning[len(THINK_OPEN) :].strip()
        split = Split(text[close + len(THINK_CLOSE) :].lstrip())
        split.add(reasoning.replace(THINK_CLOSE, "").replace(THINK_OPEN, ""), "think_tags")
        return split
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        split = Split("")
        split.add(stripped[len(THINK_OPEN) :].strip(), "think_tags")
        return split
    return Split(text)


def split_message(message: dict[str, Any]) -> Split:
    """An OpenAI-style `message`: its content (a string, a list of parts, or null) and its reasoning fields."""
    content = message.get("content")
    if isinstance(content, str):
        split = split_think(content)
    elif isinstance(content, list):
        split = split_parts(content)
    else:
        split = Split("")
        if content is not None:
            split.add("", f"unreadable: content is {_kind(content)}")
    for name in ("reasoning_content", "reasoning"):
        value = message.get(name)
        if isinstance(value, str):
            split.add(value, name)
        elif value is not None:
            split.add("", f"unreadable: {name} is {_kind(value)}")
    details = message.get("reasoning_details")
    if details is not None and "reasoning_content" not in split.sources and "reasoning" not in split.sources:
        _read_details(details, split)  # OpenRouter sends both `reasoning` and its details: read them once
    return split


def split_parts(parts: Iterable[Any]) -> Split:
    """Content as a list of parts: `text` parts are the answer, `thinking` parts (Mistral: a list of text chunks, or
    a string) the reasoning; anything else is noted and left out."""
    answer: list[str] = []
    split = Split("")
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            answer.append(part["text"])
        elif kind == "thinking":
            split.add(_text_of(part.get("thinking")), "content_parts")
        else:
            split.add("", f"unreadable: a content part of type {kind!r}" if kind else "unreadable: a content part")
    inline = split_think("".join(answer))
    split.answer = inline.answer
    for text in inline.reasoning:
        split.add(text, "think_tags")
    return split


def _read_details(details: Any, split: Split) -> None:
    """OpenRouter's `reasoning_details`: `reasoning.text` (text), `reasoning.summary` (summary), and
    `reasoning.encrypted` (data, unreadable by design: noted as redacted)."""
    if not isinstance(details, list):
        split.add("", f"unreadable: reasoning_details is {_kind(details)}")
        return
    for detail in details:
        kind = detail.get("type") if isinstance(detail, dict) else None
        if kind == "reasoning.text" and isinstance(detail.get("text"), str):
            split.add(detail["text"], "reasoning_details")
        elif kind == "reasoning.summary" and isinstance(detail.get("summary"), str):
            split.add(detail["summary"], "reasoning_details")
        elif kind == "reasoning.encrypted":
            split.add(REDACTED, "reasoning_details")
        else:
            split.add("", "unreadable: a reasoning_details entry")


def _text_of(value: Any) -> str:
    """A thinking part's text: a string, or a list of `{"type": "text", "text": ...}` chunks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            chunk["text"] for chunk in value if isinstance(chunk, dict) and isinstance(chunk.get("text"), str)
        )
    return ""


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")
