"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_server import OpenAIServer


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A fresh scriptable OpenAI-compatible server on 127.0.0.1 (random port), stopped after the test."""
    with OpenAIServer() as server:
        yield server
