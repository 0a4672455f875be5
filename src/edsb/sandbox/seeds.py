"""The random state a run's code sees: its seed, derived in the parent from the seed and the run key (`code_seed`),
and set in the child just before the code runs (`seed_randomness`). So a run's code draws the same numbers at any
concurrency and on a rerun, and no run's draws depend on what ran before it in the same template."""

from __future__ import annotations

import hashlib
import random

import numpy


def code_seed(text: str) -> int:
    """The 64-bit seed of a run's code, which depends only on `text` (the `--seed` and the run key)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def seed_randomness(seed: int) -> None:
    """Seed `random` and `numpy.random` with the run's seed: every fork of the template starts from the same state,
    which would otherwise give every run the same draws."""
    random.seed(seed)
    numpy.random.seed(seed & 0xFFFFFFFF)
