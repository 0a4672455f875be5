"""OpenRouter: OpenAI's chat completions API with the effort as `reasoning: {effort}`, and every request asking that
the settings sent be honoured (`provider.require_parameters`), so that a setting a model does not take is refused,
not dropped. The provider it relays to words its own errors (`error.metadata.raw`, read by `refusals`); its billed
cost is `usage.cost` (`providers.openai.billed_usage`)."""

from __future__ import annotations

from dataclasses import dataclass

from edsb.llm.providers.base import Provider

UNHONOURED_FIX = (
    "no provider of this model on OpenRouter takes every setting sent (provider.require_parameters): drop the one "
    "the model does not take (--temperature default, --reasoning-effort, --no-json-mode); nothing was scored"
)


@dataclass(frozen=True)
class OpenRouter(Provider):
    def refusal_fixes(self) -> tuple[tuple[str, str], ...]:
        return (("can handle the requested parameters", UNHONOURED_FIX),)  # its answer under require_parameters


ROW = OpenRouter(
    "openrouter",
    "openai",
    "OPENROUTER_API_KEY",
    "https://openrouter.ai/api/v1",
    body={"provider": {"require_parameters": True}},
    effort_object=True,
)
