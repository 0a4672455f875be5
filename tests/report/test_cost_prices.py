"""Cost estimates from billed tokens: the dated built-in table covers the models edsb names today and the paper's
engines, a dated snapshot costs what its model does, and `--price-in/--price-out` still win."""

from __future__ import annotations

import pytest

from edsb.report.cost import CLOUD_PRICES_AS_OF, CLOUD_SOURCE, PRICES_AS_OF, Price, estimate_cost, price_for
from edsb.report.summary_types import ModuleTokens, Tokens


@pytest.mark.parametrize(
    ("spec", "prices"),
    [
        ("openai:gpt-4o-2024-08-06", (2.50, 10.00)),  # the paper's engines
        ("openai:gpt-4o-mini-2024-07-18", (0.15, 0.60)),
        ("openai:gpt-5", (1.25, 10.00)),
        ("openai:gpt-5-2025-08-07", (1.25, 10.00)),  # a dated snapshot
        ("openai:gpt-5-mini", (0.25, 2.00)),
        ("openai:o3", (2.00, 8.00)),
        ("openai:o4-mini-2025-04-16", (1.10, 4.40)),
        ("anthropic:claude-sonnet-4-5-20250929", (3.00, 15.00)),
        ("anthropic:claude-opus-4-1-20250805", (15.00, 75.00)),
        ("anthropic:claude-haiku-4-5", (1.00, 5.00)),
        ("google:gemini-2.5-pro", (1.25, 10.00)),
        ("google:gemini-2.5-flash", (0.30, 2.50)),
        ("google:gemini-3-pro-preview", (2.00, 12.00)),
        ("gpt-4o-2024-08-06", (2.50, 10.00)),  # a bare name, as older configs hold it
        ("openai-responses:gpt-5", (1.25, 10.00)),  # OpenAI's price through either API
    ],
)
def test_the_builtin_table_is_dated_and_covers_todays_models(spec: str, prices: tuple[float, float]) -> None:
    price = price_for(spec)
    assert price is not None and (price.input_per_million, price.output_per_million) == prices
    owner = spec.partition(":")[0].replace("-responses", "") if ":" in spec else "openai"
    assert price.source == f"built-in list price as of {PRICES_AS_OF[owner]}"


# Claude's models since Opus 4.6, as Anthropic's pricing page and model pages list them on 2026-12-06: (input,
# output, cache read); every cache write is 1.25 times the input price.
CLAUDE_SINCE_4_6 = [
    ("claude-opus-4-7", (5.00, 25.00, 0.50)),
    ("claude-opus-4-8", (5.00, 25.00, 0.50)),
    ("claude-opus-5", (5.00, 25.00, 0.50)),
    ("claude-opus-5-5", (4.00, 20.00, 0.20)),
    ("claude-sonnet-5", (2.00, 10.00, 0.20)),
    ("claude-sonnet-5-5", (2.00, 10.00, 0.20)),
    ("claude-fable-5", (10.00, 50.00, 1.00)),
    ("claude-fable-5-1", (10.00, 50.00, 0.25)),
    ("claude-mythos-5-1", (10.00, 50.00, 0.25)),
    ("claude-haiku-5-5", (0.10, 0.50, None)),  # no cache-read rate found: its cached tokens cost the input price
]


@pytest.mark.parametrize(("model", "prices"), CLAUDE_SINCE_4_6)
def test_todays_claude_models_cost_their_own_cache_reads(model: str, prices: tuple[float, float, float | None]) -> None:
    # the model's own name, a dated snapshot's, Vertex AI's
    for spec in (f"anthropic:{model}", f"anthropic:{model}-20261201", f"anthropic-vertex:{model}@20261201"):
        price = price_for(spec)
        assert price is not None, spec
        assert (price.input_per_million, price.output_per_million, price.cached_per_million) == prices
        assert price.cache_write_per_million == pytest.approx(prices[0] * 1.25)
    listed = price_for(f"anthropic:{model}")
    assert listed is not None and listed.source == f"built-in list price as of {PRICES_AS_OF['anthropic']}"


def test_a_cache_read_on_opus_5_5_costs_a_twentieth_of_its_input() -> None:
    """Opus 5.5 reads its cache at $0.20 a million, not the tenth of its input ($0.40) most models charge."""
    tokens = Tokens(
        total_prompt=10_000,
        total_completion=100,
        by_module={"narrator": ModuleTokens(prompt=10_000, completion=100, cached=8_000)},
        mean_prompt_every_run=10_000,
        mean_completion_every_run=100,
    )
    price = price_for("anthropic:claude-opus-5-5")
    assert price is not None
    expected = (2_000 * 4.00 + 8_000 * 0.20 + 100 * 20.00) / 1e6
    assert estimate_cost(tokens, price)["total"] == pytest.approx(expected)


@pytest.mark.parametrize("spec", ["openai:gpt-6", "anthropic:gpt-5", "google:gemini-2.5-pro-20250101x", "local"])
def test_an_unlisted_model_has_no_price(spec: str) -> None:
    assert price_for(spec) is None


def test_command_line_prices_win() -> None:
    assert price_for("openai:gpt-5", 1.0, None) == Price(1.0, 0.0, "command line")


def test_cost_is_of_billed_output_thinking_included() -> None:
    # A Gemini run: 2,000 prompt tokens, 40 answer tokens and 1,200 thinking tokens, recorded as 1,240 completion.
    tokens = Tokens(
        total_prompt=2_000,
        total_completion=1_240,
        by_module={"narrator": ModuleTokens(prompt=2_000, completion=1_240)},
        mean_prompt_every_run=2_000,
        mean_completion_every_run=1_240,
    )
    price = price_for("google:gemini-2.5-flash")
    assert price is not None
    assert estimate_cost(tokens, price)["total"] == pytest.approx((2_000 * 0.30 + 1_240 * 2.50) / 1e6)


@pytest.mark.parametrize(
    ("spec", "prices", "cached"),
    [
        ("anthropic-bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", (3.00, 15.00), 0.30),
        ("anthropic-bedrock:global.anthropic.claude-haiku-4-5-20251001-v1:0", (1.00, 5.00), 0.10),
        ("anthropic-bedrock:anthropic.claude-opus-4-1-20250805-v1:0", (15.00, 75.00), 1.50),
        ("anthropic-vertex:claude-sonnet-4-5@20250929", (3.00, 15.00), 0.30),
        ("anthropic-vertex:claude-opus-4-6", (5.00, 25.00), 0.50),
        ("anthropic-bedrock:us.anthropic.claude-opus-5-5-v1:0", (4.00, 20.00), 0.20),  # a row of a later date
        ("google-vertex:gemini-2.5-pro", (1.25, 10.00), 0.125),
    ],
)
def test_the_clouds_routes_are_priced_as_the_models_they_serve(
    spec: str, prices: tuple[float, float], cached: float
) -> None:
    price = price_for(spec)
    assert price is not None and (price.input_per_million, price.output_per_million) == prices
    assert price.cached_per_million == cached
    route = spec.partition(":")[0]
    as_of = PRICES_AS_OF["google" if route == "google-vertex" else "anthropic"]  # the served provider's row
    assert price.source == (
        f"built-in list price as of {as_of}, {CLOUD_SOURCE[route]} (the route checked {CLOUD_PRICES_AS_OF[route]})"
    )
    if route.startswith("anthropic"):  # cache writes as Anthropic bills them
        assert price.cache_write_per_million == pytest.approx(prices[0] * 1.25)


@pytest.mark.parametrize("spec", ["anthropic-bedrock:meta.llama3-70b-instruct-v1:0", "google-vertex:gemini-9"])
def test_a_clouds_model_the_table_lacks_has_no_price(spec: str) -> None:
    assert price_for(spec) is None
