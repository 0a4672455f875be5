"""DeepSeek: OpenAI's chat completions API, whose thinking mode (`deepseek-reasoner`) ignores the temperature without
an error; none is sent, and an explicit one is refused before any request (`Provider.temperature_ignored`)."""

from __future__ import annotations

from edsb.llm.providers.base import Provider

ROW = Provider(
    "deepseek", "openai", "DEEPSEEK_API_KEY", "https://api.deepseek.com/v1", ignores_temperature=("deepseek-reasoner",)
)
