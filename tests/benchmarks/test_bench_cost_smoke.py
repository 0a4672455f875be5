"""`benchmarks/bench_cost.py --smoke` records a few runs of the scripted model and prints every cost figure it
promises; only the names and that the values parse are checked, plus the one ratio the price table fixes."""

from __future__ import annotations

from tests.benchmarks.test_sweep_benchmarks import _figures


def test_bench_cost_smoke_prints_every_figure() -> None:
    figures = _figures("bench_cost.py")
    modes = ("sync", "cache", "batch", "batch_cache")
    per_model = [
        [f"{m}_cache_read_share", *(f"{m}_{mode}_usd" for mode in modes)] for m in ("gpt_4o", "claude_sonnet_4_5")
    ]
    assert list(figures) == ["requests", "input_tokens_m", "shared_prefix_share", *per_model[0], *per_model[1]]
    assert abs(figures["gpt_4o_batch_usd"] - figures["gpt_4o_sync_usd"] / 2) <= 0.01  # half price, two decimals
    assert figures["claude_sonnet_4_5_batch_cache_usd"] < figures["claude_sonnet_4_5_batch_usd"]  # they combine
