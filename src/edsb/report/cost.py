"""Token cost estimates from billed tokens. Prices change: the built-in table is dated, and `--price-in/--price-out`
override it.

The completion counts a run records are the billed output: reasoning tokens are inside them (OpenAI's
`completion_tokens` and Anthropic's `output_tokens` include them; Gemini's `thoughtsTokenCount` and xAI's reasoning
are added by the client), so the output costs completion × output price, thinking included. Input tokens read from
the provider's prompt cache cost the cached rate, those written to it (Anthropic) the write rate, the rest the input
price. Where a provider says what it billed (OpenRouter's `usage.cost`), the report shows that beside the estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from edsb.llm.providers import ALIASES, PROVIDERS, get_provider
from edsb.report.summary_types import Tokens
from edsb.results.batches import BatchTokens

# The date of each provider's list prices below, as read from its own price pages as mirrored on that date: standard
# tier, no batch discount, prompts under 200K tokens (Gemini's Pro models and Claude's long-context rates cost more
# above; Claude Haiku 5.5 costs five times more above 100K). A run against newer prices names them with
# --price-in/--price-out.
PRICES_AS_OF = {"openai": "2026-03", "anthropic": "2026-12-06", "google": "2026-03", "deepinfra": "2026-03"}
# USD per million tokens (input, output, cached input), by provider and the model name edsb is given
# (`PROVIDER:<name>`); a model without a cached rate is charged the input price for its cached tokens.
BUILTIN_PRICES: dict[str, dict[str, tuple[float, float] | tuple[float, float, float]]] = {
    "openai": {
        # The paper's engines.
        "gpt-4o-2024-08-06": (2.50, 10.00, 1.25),
        "gpt-4o-mini-2024-07-18": (0.15, 0.60, 0.075),
        "gpt-4o": (2.50, 10.00, 1.25),
        "gpt-4o-mini": (0.15, 0.60, 0.075),
        # Reasoning models.
        "gpt-5": (1.25, 10.00, 0.125),
        "gpt-5.1": (1.25, 10.00, 0.125),
        "gpt-5-mini": (0.25, 2.00, 0.025),
        "gpt-5-nano": (0.05, 0.40, 0.005),
        "o3": (2.00, 8.00, 0.50),
        "o4-mini": (1.10, 4.40, 0.275),
    },
    # Each model's cache-read rate is its own (a tenth of the input price on most rows; Opus 5.5 a twentieth, Fable
    # and Mythos 5.1 a fortieth); cache writes cost `CACHE_WRITE_FACTOR` times the input price on every row.
    # Read from https://platform.claude.com/docs/en/about-claude/pricing (Fable, Mythos, Opus 4.5 to 5, Opus 4.1,
    # Opus 4) and the model pages https://platform.claude.com/docs/en/models/<model>/overview (opus-5-5, sonnet-5,
    # sonnet-5-5, haiku-5-5).
    "anthropic": {
        "claude-fable-5-1": (10.00, 50.00, 0.25),
        "claude-mythos-5-1": (10.00, 50.00, 0.25),
        "claude-fable-5": (10.00, 50.00, 1.00),
        "claude-mythos-5": (10.00, 50.00, 1.00),
        "claude-opus-5-5": (4.00, 20.00, 0.20),
        "claude-opus-5": (5.00, 25.00, 0.50),
        "claude-opus-4-8": (5.00, 25.00, 0.50),
        "claude-opus-4-7": (5.00, 25.00, 0.50),
        "claude-sonnet-5-5": (2.00, 10.00, 0.20),
        "claude-sonnet-5": (2.00, 10.00, 0.20),
        # Prompts up to 100K tokens. No cache-read rate for it was found on Anthropic's pages, so its cached tokens
        # cost the input price.
        "claude-haiku-5-5": (0.10, 0.50),
        "claude-opus-4-6": (5.00, 25.00, 0.50),
        "claude-sonnet-4-6": (3.00, 15.00, 0.30),
        "claude-opus-4-5": (5.00, 25.00, 0.50),
        "claude-sonnet-4-5": (3.00, 15.00, 0.30),
        "claude-haiku-4-5": (1.00, 5.00, 0.10),
        "claude-opus-4-1": (15.00, 75.00, 1.50),
        "claude-opus-4": (15.00, 75.00, 1.50),
        "claude-sonnet-4": (3.00, 15.00, 0.30),
    },
    "google": {
        "gemini-3-pro-preview": (2.00, 12.00, 0.20),
        "gemini-3-flash-preview": (0.50, 3.00, 0.05),
        "gemini-2.5-pro": (1.25, 10.00, 0.125),
        "gemini-2.5-flash": (0.30, 2.50, 0.03),
        "gemini-2.5-flash-lite": (0.10, 0.40, 0.01),
    },
    "deepinfra": {
        # The paper's open engine as DeepInfra serves it now (FP8).
        "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo": (0.13, 0.40),
    },
}

# The clouds' routes, priced as the provider whose models they serve (`Provider.priced_as`: a cloud's model name is
# brought to that provider's), with the date those prices were read: Claude on Amazon Bedrock and on Vertex AI costs
# Anthropic's list prices, cache reads and writes included, at the clouds' global endpoints (their regional
# endpoints charge 10% more from Claude Sonnet 4.5 and Haiku 4.5 on: name those with --price-in/--price-out); Gemini
# on Vertex AI costs the Gemini API's paid-tier prices.
CLOUD_PRICES_AS_OF = {"anthropic-bedrock": "2026-03", "anthropic-vertex": "2026-03", "google-vertex": "2026-03"}
CLOUD_SOURCE = {
    "anthropic-bedrock": "Anthropic's, at Bedrock's global endpoint",
    "anthropic-vertex": "Anthropic's, at Vertex AI's global endpoint",
    "google-vertex": "the Gemini API's",
}

# What a cache write costs, as a multiple of the input price, where the provider bills writes apart: Anthropic's
# 5-minute writes, and its 1-hour writes, which `edsb run --batch` marks (https://docs.anthropic.com/en/docs/
# about-claude/pricing: 1.25 and 2 times the base input price, as every row above still has it on 2026-12-06).
CACHE_WRITE_FACTOR = {"anthropic": 1.25}
HOUR_CACHE_WRITE_FACTOR = {"anthropic": 2.0}
# What a request sent through a batch API costs, as a multiple of the list prices above, by the batch route each
# provider's row names (`Provider.batch`): OpenAI's Batch API (also Azure's and the Responses API's), Anthropic's
# Message Batches, Gemini's batch mode: half price, input and output, as of `PRICES_AS_OF`.
BATCH_FACTOR = {"openai": 0.5, "anthropic": 0.5, "gemini": 0.5}
# Routes whose batch discount applies on top of the cached-input rates (Anthropic: cache reads and writes in a batch
# cost the batch factor times their own rate); elsewhere a batch is priced without the cache's discount.
BATCH_KEEPS_CACHE = frozenset({"anthropic"})


@dataclass(frozen=True)
class Price:
    """USD per million tokens. `cached_per_million` / `cache_write_per_million`: None charges the input price."""

    input_per_million: float
    output_per_million: float
    source: str
    cached_per_million: float | None = None
    cache_write_per_million: float | None = None


def price_for(model_spec: str, price_in: float | None = None, price_out: float | None = None) -> Price | None:
    """Explicit prices win; else the built-in table by provider and model name (`openai:<name>`; a cloud's route by
    the provider it serves, `CLOUD_PRICES_AS_OF`; a bare name is looked up under every provider), a dated snapshot as
    its model; else unknown (None)."""
    if price_in is not None or price_out is not None:
        return Price(price_in or 0.0, price_out or 0.0, "command line")
    route, sep, name = model_spec.partition(":")
    provider = route
    if sep and (route in PROVIDERS or route in ALIASES):
        provider, name = get_provider(route).priced_as(name)
    name = name if sep else model_spec
    for owner, table in [(provider, BUILTIN_PRICES.get(provider, {}))] if sep else list(BUILTIN_PRICES.items()):
        found = table.get(name) or table.get(_undated(name))
        if found is not None:
            write = CACHE_WRITE_FACTOR.get(owner)
            cached = found[2] if len(found) > 2 else None
            source = _source(route, owner)
            return Price(found[0], found[1], source, cached, None if write is None else found[0] * write)
    return None


def _source(route: str, owner: str) -> str:
    """Where a built-in price comes from (the table of `owner`), and as of when."""
    if route in CLOUD_PRICES_AS_OF:  # the provider's row, and when the cloud was last checked to charge it
        return (
            f"built-in list price as of {PRICES_AS_OF[owner]}, {CLOUD_SOURCE[route]} "
            f"(the route checked {CLOUD_PRICES_AS_OF[route]})"
        )
    return f"built-in list price as of {PRICES_AS_OF[owner]}"


def _undated(name: str) -> str:
    """A dated snapshot's model (`claude-sonnet-4-5-20250929`, `gpt-5-2025-08-07`), which costs what the model does."""
    for shape in ("-00000000", "-0000-00-00"):
        head, tail = name[: -len(shape)], name[-len(shape) :]
        if head and all(c.isdigit() if d == "0" else c == d for c, d in zip(tail, shape, strict=True)):
            return head
    return name


def estimate_cost(tokens: Tokens, price: Price) -> dict[str, float]:
    """USD per module and in total from a variant summary's token counts, cached input at its own rates."""
    costs = {
        module: usd(price, counts.prompt, counts.completion, counts.cached, counts.cache_write)
        for module, counts in tokens.by_module.items()
    }
    costs["total"] = sum(costs.values())
    return costs


def usd(price: Price, prompt: int, completion: int, cached: int = 0, cache_write: int = 0) -> float:
    """What these billed tokens cost: input read from the cache and written to it at their own rates, where known."""
    cached_rate = price.input_per_million if price.cached_per_million is None else price.cached_per_million
    write_rate = price.input_per_million if price.cache_write_per_million is None else price.cache_write_per_million
    fresh = max(prompt - cached - cache_write, 0)
    input_cost = fresh * price.input_per_million + cached * cached_rate + cache_write * write_rate
    return (input_cost + completion * price.output_per_million) / 1e6


def batch_price(model_spec: str, price: Price) -> Price | None:
    """`price` through the batch API of `PROVIDER:<model>` (`BATCH_FACTOR`), or None where its provider has none.
    Cached input keeps its own rates only where the provider says the discounts combine; cache writes are the 1-hour
    ones that a batch run marks."""
    route = _batch_route(model_spec.partition(":")[0])
    factor = None if route is None else BATCH_FACTOR.get(route)
    if route is None or factor is None:
        return None
    keeps = route in BATCH_KEEPS_CACHE
    cached = price.cached_per_million if keeps else None
    write = price.cache_write_per_million if keeps else None
    if write is not None and route in HOUR_CACHE_WRITE_FACTOR:
        write = price.input_per_million * HOUR_CACHE_WRITE_FACTOR[route]
    return Price(
        price.input_per_million * factor,
        price.output_per_million * factor,
        f"{price.source}, batch ({factor:g} x)",
        None if cached is None else cached * factor,
        None if write is None else write * factor,
    )


def _batch_route(provider: str) -> str | None:
    """The batch route a provider's row names (`Provider.batch`); None for an unknown name or a provider with none."""
    known = provider in PROVIDERS or provider in ALIASES
    return get_provider(provider).batch if known else None


def batch_cost(model_spec: str) -> Callable[[BatchTokens], float | None] | None:
    """USD of a batch's billed tokens at the model's batch price (`edsb run --batch`'s progress); None where no price
    is known."""
    price = price_for(model_spec)
    batch = None if price is None else batch_price(model_spec, price)
    if batch is None:
        return None
    known = batch
    return lambda tokens: usd(known, tokens.prompt, tokens.completion, tokens.cached, tokens.cache_write)
