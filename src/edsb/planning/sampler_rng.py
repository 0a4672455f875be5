"""The random source of the position sampler's draws: a numpy generator per run (or per `edsb score` line) that
depends only on a text naming what is sampled, so neither concurrency nor order changes a sampled point.

A run directory's secret keys the generator (HMAC-SHA256). Without it the sampler's seed is the run's code seed
(`seed_for`), which the code knows, so the code could replay the sampler's draws.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np


def generator_for(text: str) -> np.random.Generator:
    """A generator that depends only on `text` (the seed and what is sampled: a run key, a line number), so neither
    concurrency nor order changes a sampled point."""
    return np.random.default_rng(seed_for(text))


def seed_for(text: str) -> int:
    """A 64-bit seed that depends only on `text` (also the seed of a run's code: its `random` and `numpy.random`)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def secret_generator_for(secret: str, text: str) -> np.random.Generator:
    """A generator of `text` keyed by `secret` (HMAC-SHA256): code that knows `text`, and so its own seed, but not
    the secret cannot tell what it draws. An empty secret gives `generator_for(text)`, the earlier derivation."""
    return np.random.default_rng(secret_seed_for(secret, text))


def secret_seed_for(secret: str, text: str) -> int:
    """The 64-bit seed of `secret_generator_for(secret, text)`: what a sampler process is sent instead of the
    generator (an empty secret gives `seed_for(text)`)."""
    if not secret:
        return seed_for(text)
    digest = hmac.new(secret.encode(), text.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little")
