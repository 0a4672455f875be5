"""Expanding a run configuration into run keys, in the reference's loop order, and the order to execute them in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from edsb.data.models import SCENES, TestCase
from edsb.planning.variants import get_variant
from edsb.results import RunKey

__all__ = ["RunKey", "expand_keys", "longest_first"]


def expand_keys(
    variants: Iterable[str],
    case_ids: Iterable[int],
    levels: Iterable[int],
    repeats: int,
    cases: Mapping[int, TestCase],
) -> list[RunKey]:
    """Keys in the reference's loop order: per variant, scenes House/Office/Restaurant, ids ascending, then each
    requested level up to the case's max, then each repeat. Levels above a case's max are skipped, as there."""
    wanted = sorted(set(case_ids))
    keys: list[RunKey] = []
    for variant in variants:
        for scene in SCENES:
            for cid in wanted:
                case = cases[cid]
                if case.scene_name != scene:
                    continue
                for level in sorted(set(levels)):
                    if level > case.max_distraction:
                        continue
                    keys.extend(RunKey(variant, cid, level, repeat) for repeat in range(repeats))
    return keys


def longest_first(keys: Sequence[RunKey]) -> list[RunKey]:
    """Runs that ask the model twice (Narrator, then Event Parser) before those that ask once (w/o Event), each
    group in the given order. Long jobs first, short ones last (longest-processing-time-first scheduling): the
    last free slots of a sweep are filled by short runs instead of the sweep waiting on a few long ones."""
    return sorted(keys, key=lambda key: get_variant(key.variant).parser is None)
