"""The random state a run's code sees (`edsb.sandbox.seeds`): the seed a run's code gets depends on its text alone and
has not changed (a rerun of an older directory draws what it drew), and seeding sets both `random` and
`numpy.random`. `test_pool.py` checks the same in a real child, whatever ran before it."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from edsb.sandbox.seeds import code_seed, seed_randomness

# Seeds as every earlier version of edsb derived them (the first 8 bytes of SHA-256, little-endian).
KNOWN = {"0/some-run": 5967295856650060439, "": 1449310910991872227, "7/scene-graph/60/0/3": 13162714613513832520}


@pytest.fixture
def global_random_state() -> Iterator[None]:
    """The test process's own random states, put back afterwards: seeding them is the point of the test."""
    kept = random.getstate(), np.random.get_state()
    yield
    random.setstate(kept[0])
    np.random.set_state(kept[1])


@pytest.mark.parametrize(("text", "seed"), KNOWN.items())
def test_the_code_seed_is_the_one_earlier_versions_derived(text: str, seed: int) -> None:
    assert code_seed(text) == seed
    assert 0 <= code_seed(text) < 2**64


def test_seeding_sets_random_and_numpy_random(global_random_state: None) -> None:
    seed = code_seed("0/some-run")
    seed_randomness(seed)
    drawn = random.random(), np.random.rand()
    assert drawn == (random.Random(seed).random(), np.random.RandomState(seed & 0xFFFFFFFF).rand())
    random.random(), np.random.rand()  # the state moves on; seeding again starts it over
    seed_randomness(seed)
    assert (random.random(), np.random.rand()) == drawn
    seed_randomness(code_seed("1/some-run"))
    assert random.random() != drawn[0]
