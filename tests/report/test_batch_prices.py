"""Batch prices: one factor per batch route on the dated list prices; on Anthropic the cache's rates apply inside a
batch (its writes are the 1-hour ones a batch run marks, at twice the input price), elsewhere a batch is priced
without them."""

from __future__ import annotations

import pytest

from edsb.report.cost import batch_cost, batch_price, price_for
from edsb.results.batches import BatchTokens

# The paper's open engine, on a host with a price and no batch API.
NO_BATCH = "deepinfra:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo"


def test_anthropic_batches_halve_every_rate_cache_included() -> None:
    price = price_for("anthropic:claude-sonnet-4-5")
    assert price is not None
    batch = batch_price("anthropic:claude-sonnet-4-5", price)
    assert batch is not None
    rates = (batch.input_per_million, batch.output_per_million, batch.cached_per_million, batch.cache_write_per_million)
    assert rates == pytest.approx((1.50, 7.50, 0.15, 3.00))


def test_openai_batches_halve_the_list_price_without_the_cache_discount() -> None:
    price = price_for("openai:gpt-4o-2024-08-06")
    assert price is not None
    batch = batch_price("openai:gpt-4o-2024-08-06", price)
    assert batch is not None
    assert (batch.input_per_million, batch.output_per_million, batch.cached_per_million) == (1.25, 5.00, None)


@pytest.mark.parametrize("model", ["openai-responses:o3", "openai:gpt-4o"])
def test_every_route_to_openais_batch_api_gets_its_price(model: str) -> None:
    """The Responses API's models go through OpenAI's Batch API as well, at its price."""
    price = price_for(model)
    assert price is not None
    batch = batch_price(model, price)
    assert batch is not None and batch.input_per_million == price.input_per_million / 2


def test_a_provider_without_a_batch_api_has_no_batch_price() -> None:
    price = price_for(NO_BATCH)
    assert price is not None and batch_price(NO_BATCH, price) is None


def test_a_batch_runs_cost_so_far_applies_the_batch_rates() -> None:
    """The progress of `edsb run --batch`: Anthropic's cache reads and 1-hour writes at their own rates, halved."""
    cost = batch_cost("anthropic:claude-sonnet-4-5")
    assert cost is not None
    tokens = BatchTokens(prompt=3_000_000, completion=1_000_000, cached=1_000_000, cache_write=1_000_000)
    assert cost(tokens) == pytest.approx(1.50 + 7.50 + 0.15 + 3.00)
    assert batch_cost(NO_BATCH) is None
