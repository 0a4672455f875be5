"""Token cost estimates. Prices change: the built-in table is dated, and `--price-in/--price-out` override it."""

from __future__ import annotations

from dataclasses import dataclass

from edsb.report.summary_types import Tokens

PRICES_AS_OF = "2025-06"
# USD per million tokens (input, output): OpenAI list prices for the engines the paper evaluates.
BUILTIN_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-2024-08-06": (2.50, 10.00),
    "gpt-4o-mini-2024-07-18": (0.15, 0.60),
}


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float
    source: str


def price_for(model_spec: str, price_in: float | None = None, price_out: float | None = None) -> Price | None:
    """Explicit prices win; else the built-in table by model name (`openai:<name>`); else unknown (None)."""
    if price_in is not None or price_out is not None:
        return Price(price_in or 0.0, price_out or 0.0, "command line")
    name = model_spec.split(":", 1)[1] if model_spec.startswith("openai:") else model_spec
    if name in BUILTIN_PRICES:
        low, high = BUILTIN_PRICES[name]
        return Price(low, high, f"built-in list price as of {PRICES_AS_OF}")
    return None


def estimate_cost(tokens: Tokens, price: Price) -> dict[str, float]:
    """USD per module and in total from a variant summary's token counts."""
    costs: dict[str, float] = {}
    for module, counts in tokens.by_module.items():
        costs[module] = (counts.prompt * price.input_per_million + counts.completion * price.output_per_million) / 1e6
    costs["total"] = sum(costs.values())
    return costs
