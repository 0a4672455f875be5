"""Where placing a character begins: the seat rule, which places it outright, and the annealer's start, which the
optimiser also prefers to be near (docs/reference.md#position-sampler).

The seat rule is the reference's: `lie on` anything, or `sit on` a chair, armchair or stool, puts the character on
the seat point without optimising. The start is the first object anchor's centre (the two centres' midpoint for
`between` / `aligned with`), else a random free cell of a box-based grid (`edsb.geometry.grid`), where the reference
casts rays against the HSSD meshes edsb does not ship.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edsb.geometry.boxes import Box
from edsb.geometry.grid import occupancy_grid_of
from edsb.geometry.relations import (
    DIRECTIONS,
    INTERACTION_PREDICATES,
    LIE_ON,
    SAMPLER_DISTANCE_THRESHOLDS,
    SIT_ON,
    TWO_ANCHOR_PREDICATES,
    split_anchor,
)
from edsb.geometry.scene import Scene
from edsb.planning.sampler_cost import Anchors, SamplerSeatError

#: `sit on` one of these labels places the character on the seat point without optimising.
SEAT_LABELS = frozenset({"chair", "armchair", "stool"})


def seat_point(box: Box) -> np.ndarray:
    """float32 (2,): where a seated character's root goes, `depth · sit_offset_horizontal` along the front."""
    return box.center[:2] + box.front[:2] * (box.depth * box.sit_offset_horizontal)


def _seat_anchor(anchors: Anchors, relationship: str) -> Box:
    box = anchors.find(split_anchor(relationship)[1])
    if box is None:
        raise SamplerSeatError(f"cannot sit or lie on a character: {relationship!r}")
    return box


def fixed_seat(anchors: Anchors, rewritten: Sequence[str]) -> np.ndarray | None:
    """The seat point when the rule applies (any `lie on`, or `sit on` a chair-like object), else None.

    The rule is decided by the first relationship that settles it, but the point always comes from the first
    relationship mentioning `sit on` / `lie on`, whatever its anchor.
    """
    applies = False
    for relationship in rewritten:
        if LIE_ON in relationship:
            applies = True
            break
        if SIT_ON in relationship and _seat_anchor(anchors, relationship).label in SEAT_LABELS:
            applies = True
            break
    if not applies:
        return None
    first = next(r for r in rewritten if LIE_ON in r or SIT_ON in r)
    return seat_point(_seat_anchor(anchors, first))


_SINGLE_ANCHOR_PREFIXES = (*SAMPLER_DISTANCE_THRESHOLDS, *INTERACTION_PREDICATES, *DIRECTIONS)


def anchor_start(anchors: Anchors, rewritten: Sequence[str]) -> np.ndarray | None:
    """The annealer's start: the first relationship with object anchors gives the centre (or the two centres'
    midpoint); None if there is none. Anchors are looked up on the way, exact predicate or not."""
    for relationship in rewritten:
        if relationship.startswith(TWO_ANCHOR_PREDICATES):
            _, first, second = anchors.pair(relationship)
            if first is not None and second is not None:
                return (first.center[:2] + second.center[:2]) / 2
        if relationship.startswith(_SINGLE_ANCHOR_PREFIXES):
            box = anchors.find(split_anchor(relationship)[1])
            if box is not None:
                return box.center[:2]
    return None


def random_start(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    """float32 (2,): a free grid cell drawn uniformly, the annealer's start when no relationship has an object."""
    free = occupancy_grid_of(scene).free_points()
    return free[rng.integers(len(free))]
