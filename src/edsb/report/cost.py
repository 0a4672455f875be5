"""Token cost estimates from billed tokens. Prices change: the built-in table is dated, and `--price-in/--price-out`
override it.

The completion counts a run records are the billed output: reasoning tokens are inside them (OpenAI's
`completion_tokens` and Anthropic's `output_tokens` include them; Gemini's `thoughtsTokenCount` is added by the
client), so an estimate is input × input price + completion × output price, thinking included.
"""

from __future__ import annotations

from dataclasses import dataclass

from edsb.report.summary_types import Tokens

# The date of the list prices below: standard tier, no batch or cache discount, prompts under 200K tokens (Gemini's
# Pro models and Claude's long-context rates cost more above). They were read from the providers' price pages as
# mirrored on that date; a run against newer prices names them with --price-in/--price-out.
PRICES_AS_OF = "2026-03"
# USD per million tokens (input, output), by provider and the model name edsb is given (`PROVIDER:<name>`).
BUILTIN_PRICES: dict[str, dict[str, tuple[float, float]]] = {
    "openai": {
        # The paper's engines.
        "gpt-4o-2024-08-06": (2.50, 10.00),
        "gpt-4o-mini-2024-07-18": (0.15, 0.60),
        "gpt-4o": (2.50, 10.00),
        "gpt-4o-mini": (0.15, 0.60),
        # Reasoning models.
        "gpt-5": (1.25, 10.00),
        "gpt-5.1": (1.25, 10.00),
        "gpt-5-mini": (0.25, 2.00),
        "gpt-5-nano": (0.05, 0.40),
        "o3": (2.00, 8.00),
        "o4-mini": (1.10, 4.40),
    },
    "anthropic": {
        "claude-opus-4-6": (5.00, 25.00),
        "claude-sonnet-4-6": (3.00, 15.00),
        "claude-opus-4-5": (5.00, 25.00),
        "claude-sonnet-4-5": (3.00, 15.00),
        "claude-haiku-4-5": (1.00, 5.00),
        "claude-opus-4-1": (15.00, 75.00),
        "claude-opus-4": (15.00, 75.00),
        "claude-sonnet-4": (3.00, 15.00),
    },
    "google": {
        "gemini-3-pro-preview": (2.00, 12.00),
        "gemini-3-flash-preview": (0.50, 3.00),
        "gemini-2.5-pro": (1.25, 10.00),
        "gemini-2.5-flash": (0.30, 2.50),
        "gemini-2.5-flash-lite": (0.10, 0.40),
    },
    "deepinfra": {
        # The paper's open engine as DeepInfra serves it now (FP8).
        "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo": (0.13, 0.40),
    },
}


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float
    source: str


def price_for(model_spec: str, price_in: float | None = None, price_out: float | None = None) -> Price | None:
    """Explicit prices win; else the built-in table by provider and model name (`openai:<name>`; a bare name is
    looked up under every provider), a dated snapshot as its model; else unknown (None)."""
    if price_in is not None or price_out is not None:
        return Price(price_in or 0.0, price_out or 0.0, "command line")
    provider, sep, name = model_spec.partition(":")
    tables = [BUILTIN_PRICES.get(provider, {})] if sep else list(BUILTIN_PRICES.values())
    name = name if sep else model_spec
    for table in tables:
        found = table.get(name) or table.get(_undated(name))
        if found is not None:
            return Price(*found, f"built-in list price as of {PRICES_AS_OF}")
    return None


def _undated(name: str) -> str:
    """A dated snapshot's model (`claude-sonnet-4-5-20250929`, `gpt-5-2025-08-07`), which costs what the model does."""
    for shape in ("-00000000", "-0000-00-00"):
        head, tail = name[: -len(shape)], name[-len(shape) :]
        if head and all(c.isdigit() if d == "0" else c == d for c, d in zip(tail, shape, strict=True)):
            return head
    return name


def estimate_cost(tokens: Tokens, price: Price) -> dict[str, float]:
    """USD per module and in total from a variant summary's token counts."""
    costs: dict[str, float] = {}
    for module, counts in tokens.by_module.items():
        costs[module] = (counts.prompt * price.input_per_million + counts.completion * price.output_per_million) / 1e6
    costs["total"] = sum(costs.values())
    return costs
