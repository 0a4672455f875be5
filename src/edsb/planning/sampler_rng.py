"""The random source of the position sampler's draws: a numpy generator per run (or per `edsb score` line) that
depends only on a text naming what is sampled, so neither concurrency nor order changes a sampled point.

A run directory's secret keys the generator (HMAC-SHA256). Without it the sampler's seed is the run's code seed
(`edsb.sandbox.seeds.code_seed`), which the code knows, so the code could replay the sampler's draws.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np

from edsb.sandbox.seeds import code_seed


def generator_for(text: str) -> np.random.Generator:
    """A generator that depends only on `text` (the seed and what is sampled: a run key, a line number), so neither
    concurrency nor order changes a sampled point."""
    return np.random.default_rng(code_seed(text))


def secret_generator_for(secret: str, text: str) -> np.random.Generator:
    """A generator of `text` keyed by `secret` (HMAC-SHA256): code that knows `text`, and so its own seed, but not
    the secret cannot tell what it draws. An empty secret gives `generator_for(text)`, the earlier derivation."""
    return np.random.default_rng(secret_seed_for(secret, text))


def secret_seed_for(secret: str, text: str) -> int:
    """The 64-bit seed of `secret_generator_for(secret, text)`: what a sampler process is sent instead of the
    generator (an empty secret gives the code's seed of `text`)."""
    if not secret:
        return code_seed(text)
    digest = hmac.new(secret.encode(), text.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little")
