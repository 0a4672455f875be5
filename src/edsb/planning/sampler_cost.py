"""The position sampler's cost (docs/reference.md#position-sampler): what standing at a point costs a character,
given its relationship strings. Both samplers minimise it (`sampler_anneal`, `sampler_lattice`).

The cost is the reference's, term by term: the same rewriting of the input, the same weights and thresholds, the same
distances (from `edsb.geometry.distances`), infinite cost outside the allowed area and character anchors free. Two
deliberate differences leave the cost itself unchanged:

- Collisions use the reference's `bbox` mode (a point strictly inside the footprint of a floor-standing object), the
  same test the judge applies. The reference's default casts rays from a vertical cylinder against the HSSD meshes;
  edsb ships no meshes, so PI results are mesh-free and must be labelled so.
- Unknown anchors and predicates are reported before any search, in the order the reference meets them. The
  reference only meets them when it scores an in-bounds point, which in the benchmark scenes is always its start.
  The exception types follow the reference (KeyError, ValueError, AttributeError for seating on a character) except
  for malformed two-anchor strings (`between chair_1`, `between the a and b`), ValueError here, where the reference
  trips over an index or a dictionary key; every one of them is an execution error upstream.

Each term also knows a box holding every point where it is zero (`PositionCost.zero_box`), so that the lattice search
can skip most of the lattice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from edsb.geometry.boxes import Box
from edsb.geometry.collision import floor_collisions
from edsb.geometry.distances import box_distance, directional_distance, interaction_distance, two_anchor_distance
from edsb.geometry.relations import (
    ADJACENT_TO,
    BEHIND,
    DIRECTIONS,
    IN_FRONT_OF,
    INTERACTION_PREDICATES,
    LEFT_OF,
    LIE_ON,
    LOOK_AT,
    RIGHT_OF,
    SAMPLER_DIRECTIONAL_OFFSET,
    SAMPLER_DISTANCE_THRESHOLDS,
    SIT_ON,
    TWO_ANCHOR_PREDICATES,
    split_anchor,
    split_two_anchors,
)
from edsb.geometry.scene import Scene
from edsb.results import ErrorKind, RunError

# The reference's cost settings (configs/benchmark.yaml, position_sampler).

#: Substring replacements applied to every relationship before sampling (the runner's, quirk included: any
#: occurrence of `inside` becomes `sit on`).
RELATIONSHIP_REWRITES: tuple[tuple[str, str], ...] = (("inside", SIT_ON), ("interact with", ADJACENT_TO))
COST_SCALE = 1.0  # k
COST_RANGE = 5.0  # r: a term grows as k·exp(distance / r)
COLLISION_PENALTY = 100.0
TWO_ANCHOR_WEIGHT = 1.0
DISTANCE_WEIGHT = 1.0
DIRECTIONAL_WEIGHT = 1.0
INTERACTION_WEIGHT = 100.0

Term = Callable[[np.ndarray], np.ndarray]


class SamplerAnchorError(RunError, KeyError):
    """A relationship names an anchor that is neither an object of the scene nor a character (KeyError upstream)."""

    kind = ErrorKind.SAMPLER_ANCHOR  # the model's: its plan names the anchor, and the reference's sampler fails on it

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SamplerPredicateError(RunError, ValueError):
    """A relationship whose predicate the sampler cannot score."""

    kind = ErrorKind.SAMPLER_PREDICATE  # the model's: its plan wrote the relationship


class SamplerSeatError(RunError, AttributeError):
    """`sit on` / `lie on` a character: the reference fails reading the character's seat attributes."""

    kind = ErrorKind.SAMPLER_SEAT  # the model's: its plan seats a character on another


def rewrite_relationships(relationships: Sequence[str]) -> list[str]:
    """The strings the sampler works on: `inside` → `sit on`, `interact with` → `adjacent to`, as substrings."""
    rewritten = []
    for relationship in relationships:
        for old, new in RELATIONSHIP_REWRITES:
            relationship = relationship.replace(old, new)
        rewritten.append(relationship)
    return rewritten


@dataclass(frozen=True)
class Anchors:
    """Name lookup as the reference's table: characters shadow objects of the same name."""

    scene: Scene
    characters: Collection[str]

    def find(self, name: str) -> Box | None:
        """The object called `name`, None for a character, SamplerAnchorError for anything else."""
        if name in self.characters:
            return None
        try:
            return self.scene.by_name[name]
        except KeyError:
            raise SamplerAnchorError(f"unknown anchor {name!r}") from None

    def pair(self, relationship: str) -> tuple[str, Box | None, Box | None]:
        """(predicate, first anchor, second anchor) of a two-anchor relationship, looked up in that order."""
        try:
            predicate, first, second = split_two_anchors(relationship)
        except ValueError:
            raise SamplerPredicateError(f"{relationship!r} needs two anchors") from None
        return predicate, self.find(first), self.find(second)


@dataclass(frozen=True, eq=False)
class PositionCost:
    """The sampler's cost of standing at points, for one set of (rewritten, validated) relationships."""

    scene: Scene
    terms: tuple[Term, ...]
    avoids_collisions: bool  # false once any relationship mentions `sit on` / `lie on`
    # float64 (2, 2) [[min_x, min_y], [max_x, max_y]] holding every zero-cost point, empty (min > max) when no point
    # can cost zero, None when the terms do not bound it; lets the lattice search skip most of the lattice
    zero_box: np.ndarray | None = None

    def __call__(self, points: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
        """float64 (N,) for points (N, 2), evaluated at float32 like the reference's positions; ∞ out of bounds."""
        xy = np.asarray(points, dtype=np.float32).reshape(-1, 2)
        return self.summed(xy, floor_collisions(self.scene, xy), self.scene.within_allowed(xy))

    def summed(self, xy: np.ndarray, collisions: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """The cost at float32 points (N, 2) whose collisions and boundary test are already known."""
        total = np.zeros(len(xy))
        if self.avoids_collisions:
            total += COLLISION_PENALTY * collisions
        for term in self.terms:
            total += term(xy)
        total[~allowed] = np.inf
        return total


def _growth(distance: np.ndarray) -> np.ndarray:
    return COST_SCALE * np.exp(distance / COST_RANGE)


def _free(points: np.ndarray) -> np.ndarray:
    return np.zeros(len(points))


# Where a term can be zero: None (anywhere), or a float64 (2, 2) box [[min_x, min_y], [max_x, max_y]] holding every
# point where it is; `_NOWHERE` (an empty box) for terms that never vanish (each adds at least k·exp(0) = 1).
ZeroBox = np.ndarray | None
_NOWHERE = np.array([[np.inf, np.inf], [-np.inf, -np.inf]])
ZERO_BOX_MARGIN = 0.01  # metres added around a zero box: far above float32 rounding of canonical coordinates


def _canonical_box(box: Box, x: tuple[float, float], y: tuple[float, float]) -> np.ndarray:
    """World bounding box of the rectangle x × y of the box's canonical frame, grown by ZERO_BOX_MARGIN."""
    corners = np.array([[cx, cy] for cx in x for cy in y])
    world = box.center[:2].astype(np.float64) + corners @ box.rotation.astype(np.float64)  # rotation⁻¹ = rotationᵀ
    return np.stack([world.min(axis=0) - ZERO_BOX_MARGIN, world.max(axis=0) + ZERO_BOX_MARGIN])


def _reach(scene: Scene, box: Box) -> float:
    """The farthest any point of the allowed area lies from the box's centre: bounds the unbounded strips."""
    (low_x, low_y), (high_x, high_y) = scene.allowed_xy
    corners = np.array([[low_x, low_y], [low_x, high_y], [high_x, low_y], [high_x, high_y]])
    return float(np.linalg.norm(corners - box.center[:2], axis=1).max())


def _two_anchor_term(anchors: Anchors, relationship: str) -> tuple[Term, ZeroBox]:
    predicate, first, second = anchors.pair(relationship)
    if first is None or second is None:
        return _free, None
    if predicate not in TWO_ANCHOR_PREDICATES:  # the reference fails looking up its tolerances
        raise SamplerPredicateError(f"unknown two-anchor predicate {predicate!r}")
    centers = (first.center, second.center)
    return lambda xy: TWO_ANCHOR_WEIGHT * _growth(two_anchor_distance(*centers, xy, predicate)), _NOWHERE


def _distance_term(anchors: Anchors, relationship: str) -> tuple[Term, ZeroBox]:
    predicate, name = split_anchor(relationship)
    if predicate not in SAMPLER_DISTANCE_THRESHOLDS:  # e.g. `close to the sofa`: silently free, anchor unread
        return _free, None
    box = anchors.find(name)
    if box is None:
        return _free, None
    threshold = SAMPLER_DISTANCE_THRESHOLDS[predicate]

    def term(xy: np.ndarray) -> np.ndarray:
        distance = box_distance(box, xy)
        return DISTANCE_WEIGHT * np.where(distance < threshold, 0.0, _growth(distance - threshold))

    # zero within `threshold` of the footprint
    x, y = box.half_width + threshold, box.half_depth + threshold
    return term, _canonical_box(box, (-x, x), (-y, y))


def _directional_term(anchors: Anchors, relationship: str) -> tuple[Term, ZeroBox]:
    predicate, name = split_anchor(relationship)
    if predicate not in DIRECTIONS:
        return _free, None
    box = anchors.find(name)
    if box is None or not box.has_orientation:
        return _free, None

    def term(xy: np.ndarray) -> np.ndarray:
        distance = directional_distance(box, xy, predicate, SAMPLER_DIRECTIONAL_OFFSET)
        return DIRECTIONAL_WEIGHT * np.where(distance == 0.0, 0.0, _growth(distance))

    # zero on the strip past the face, `offset` wider than the box, cut where the allowed area ends
    reach, offset = _reach(anchors.scene, box), SAMPLER_DIRECTIONAL_OFFSET
    wide = (-box.half_width - offset, box.half_width + offset)
    deep = (-box.half_depth - offset, box.half_depth + offset)
    strips = {
        IN_FRONT_OF: (wide, (box.half_depth, reach)),
        BEHIND: (wide, (-reach, -box.half_depth)),
        RIGHT_OF: ((box.half_width, reach), deep),
        LEFT_OF: ((-reach, -box.half_width), deep),
    }
    return term, _canonical_box(box, *strips[predicate])


def _interaction_term(anchors: Anchors, relationship: str) -> tuple[Term, ZeroBox]:
    predicate, name = split_anchor(relationship)
    if predicate not in INTERACTION_PREDICATES:
        return _free, None
    box = anchors.find(name)
    if box is None:
        return _free, None
    return lambda xy: INTERACTION_WEIGHT * _growth(interaction_distance(box, xy)), _NOWHERE


# Relationships are dispatched on their prefix, in this order; `look at` costs nothing.
_TERM_BUILDERS: tuple[tuple[tuple[str, ...], Callable[[Anchors, str], tuple[Term, ZeroBox]] | None], ...] = (
    (TWO_ANCHOR_PREDICATES, _two_anchor_term),
    (tuple(SAMPLER_DISTANCE_THRESHOLDS), _distance_term),
    (DIRECTIONS, _directional_term),
    (INTERACTION_PREDICATES, _interaction_term),
    ((LOOK_AT,), None),
)


def compile_rewritten(scene: Scene, rewritten: Sequence[str], characters: Collection[str]) -> PositionCost:
    """The cost of relationships already rewritten (`rewrite_relationships`), each one checked on the way."""
    anchors = Anchors(scene, characters)
    terms: list[Term] = []
    zero_box: ZeroBox = None
    for relationship in rewritten:
        for prefixes, build in _TERM_BUILDERS:
            if relationship.startswith(prefixes):
                if build is not None:
                    term, box = build(anchors, relationship)
                    terms.append(term)
                    if box is not None:  # the zero set of a sum of non-negative terms: where every term is zero
                        zero_box = box if zero_box is None else np.stack([
                            np.maximum(zero_box[0], box[0]), np.minimum(zero_box[1], box[1])
                        ])  # fmt: skip
                break
        else:
            raise SamplerPredicateError(f"cannot place a character by {relationship!r}")
    avoids = not any(SIT_ON in r or LIE_ON in r for r in rewritten)
    return PositionCost(scene, tuple(terms), avoids, zero_box)


def compile_cost(
    scene: Scene, relationships: Sequence[str], *, characters: Collection[str] | None = None
) -> PositionCost:
    """The cost the sampler minimises for these relationships (rewritten first). Raises SamplerAnchorError /
    SamplerPredicateError for what the reference cannot score."""
    return compile_rewritten(scene, rewrite_relationships(relationships), characters or ())


def position_cost(
    scene: Scene,
    relationships: Sequence[str],
    points: np.ndarray | Sequence[Sequence[float]],
    *,
    characters: Collection[str] | None = None,
) -> np.ndarray:
    """float64 (N,): the sampler's cost at each point (N, 2); for tests, plots and comparisons."""
    return compile_cost(scene, relationships, characters=characters)(points)
