"""The position sampler of the PI cases (docs/reference.md#position-sampler): where a character stands, given its
relationship strings.

The cost is the reference's, term by term: the same rewriting of the input, the same weights and thresholds, the same
distances (from `edsb.geometry.distances`), infinite cost outside the allowed area, character anchors free, and the
seat rule that bypasses optimisation for `lie on` and for `sit on` a chair, armchair or stool.

Two samplers minimise that cost (`SamplerName`):

- `reference` (the default): the reference's simulated annealing, step for step (docs/reference.md#position-sampler). It
  starts at the first object anchor's centre (the two centres' midpoint for `between` / `aligned with`), else at a
  random free grid cell; proposes the current point plus N(0, 0.5²) per axis in float32; accepts a better point always
  and a worse one when exp((old − new)/T) beats a uniform draw; cools T from 1.0 by 0.9 per accepted move down to 1e-4;
  stops after 20 accepted moves in a row whose relative change abs(new − old)/(old + 1e-6) is below 0.05, or after 5,000
  proposals; and returns the last accepted point, not the best (docs/reference.md#last-accepted-point). It may therefore
  stop in a local minimum or just outside the judge's area, as the reference's does. The one difference is the random
  source: one seeded numpy generator per run (a normal pair, then a uniform, per proposal) instead of the unseeded
  global ones.
- `optimal`: a lattice search that always returns an optimal point. The cost is evaluated at once on a 5 cm lattice
  over the whole allowed area (collisions on it are cached per scene), the best lattice points are polished by a
  vectorised pattern search, and the answer is an optimal point rather than the annealer's last accepted one.
  Among equally good points it prefers those whose neighbourhood (the scene's character radius, else 0.1 m) is
  optimal too, then points near the annealer's start, drawn at random from the caller's generator. So a
  consistent set of relationships always lands in its zero-cost region: the ceiling of what the relationships
  allow, not the paper's number. Two shortcuts leave every answer as it was. Each term knows a box holding all the
  points where it is zero; when the lattice block inside the boxes' intersection holds a zero-cost point, only
  that block's free points are evaluated (every cost is 0 or at least 1, so nothing outside it or between lattice
  points can do better). And the search result is kept per (scene, relationships, characters), so the repeats of
  a case only make the draw.

Deliberate differences from the reference that both samplers share, all of which leave the cost itself unchanged:

- Collisions use the reference's `bbox` mode (a point strictly inside the footprint of a floor-standing object), the
  same test the judge applies, and the random start uses a box-based grid (`edsb.geometry.grid`). The reference's
  default casts rays from a vertical cylinder against the HSSD meshes; edsb ships no meshes, so PI results are
  mesh-free and must be labelled so.
- Unknown anchors and predicates are reported before any search, in the order the reference meets them. The
  reference only meets them when it scores an in-bounds point, which in the benchmark scenes is always its start.
  The exception types follow the reference (KeyError, ValueError, AttributeError for seating on a character) except
  for malformed two-anchor strings (`between chair_1`, `between the a and b`), ValueError here, where the reference
  trips over an index or a dictionary key; every one of them is an execution error upstream.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from edsb.geometry.boxes import Box
from edsb.geometry.collision import floor_collisions
from edsb.geometry.distances import box_distance, directional_distance, interaction_distance, two_anchor_distance
from edsb.geometry.grid import occupancy_grid_of
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
from edsb.planning.variants import SamplerName
from edsb.results import ErrorKind, RunError

if TYPE_CHECKING:
    from edsb.scoring.score_file import PositionSampler

# --- the reference's cost settings (configs/benchmark.yaml, position_sampler) -----------------------------------

#: Substring replacements applied to every relationship before sampling (the runner's, quirk included: any
#: occurrence of `inside` becomes `sit on`).
RELATIONSHIP_REWRITES: tuple[tuple[str, str], ...] = (("inside", SIT_ON), ("interact with", ADJACENT_TO))
#: `sit on` one of these labels places the character on the seat point without optimising.
SEAT_LABELS = frozenset({"chair", "armchair", "stool"})
COST_SCALE = 1.0  # k
COST_RANGE = 5.0  # r: a term grows as k·exp(distance / r)
COLLISION_PENALTY = 100.0
TWO_ANCHOR_WEIGHT = 1.0
DISTANCE_WEIGHT = 1.0
DIRECTIONAL_WEIGHT = 1.0
INTERACTION_WEIGHT = 100.0

# --- the reference's annealer (configs/benchmark.yaml, position_sampler) ------------------------------------------

START_TEMPERATURE = 1.0
COOLING = 0.9  # per accepted move (cooling_interval 1)
TEMPERATURE_FLOOR = 1e-4
MOVE_STD = 0.5  # metres, per axis
CONVERGENCE_CHANGE = 0.05  # an accepted move with a relative cost change below this counts towards convergence
CONVERGENCE_MOVES = 20  # that many such moves in a row stop the search
MAX_PROPOSALS = 5_000
RELATIVE_EPSILON = 1e-6  # added to the old cost in the relative change

# --- edsb's bound on the work of sampling one plan (the reference has none) -------------------------------------

#: Cost terms that sampling one plan may evaluate: each character placed by search counts one (collisions and the
#: allowed area) plus one per term its relationships compile to (a seat or a `look at` counts none). Every term is
#: evaluated at each of up to MAX_PROPOSALS proposals, so this bounds the annealer at 120,000 term evaluations,
#: a few seconds of the runner's CPU (SECURITY.md), where a plan of 11 characters with 64 relationships each took
#: over a minute. The bound sits far above what the prompts call for, so that no plan a model could mean changes
#: verdict: the expected plans need 2 or 3 terms, and a plan for all eight characters of a scene, each placed by
#: two relationships, needs 24.
MAX_SAMPLING_TERMS = 24

# --- edsb's optimiser (`--sampler optimal`) ---------------------------------------------------------------------

LATTICE_STEP = 0.05  # metres between lattice points; the judge's tolerances are 0.1 m and more
POLISHED_POINTS = 16  # best lattice points handed to the pattern search
POLISH_STEP_FLOOR = 1e-5  # the pattern search stops once its step is below this (float32 spacing is ~1e-6 m)
POLISH_MAX_ROUNDS = 200
OPTIMA_CACHED = 64  # relationship sets whose search result is kept (a few hundred lattice points each, typically)
CLEARANCE_FALLBACK = 0.1  # neighbourhood radius tried when the character radius leaves no optimal point
PROXIMITY_SCALE = 1.0  # metres: how quickly preference fades with distance from the start beyond the nearest point

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
class _Anchors:
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


# --- the cost ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PositionCost:
    """The sampler's cost of standing at points, for one set of (rewritten, validated) relationships."""

    scene: Scene
    terms: tuple[Term, ...]
    avoids_collisions: bool  # false once any relationship mentions `sit on` / `lie on`
    # float64 (2, 2) [[min_x, min_y], [max_x, max_y]] holding every zero-cost point, empty (min > max) when no point
    # can cost zero, None when the terms do not bound it; lets the search skip most of the lattice (see `_search`)
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


def _two_anchor_term(anchors: _Anchors, relationship: str) -> tuple[Term, ZeroBox]:
    predicate, first, second = anchors.pair(relationship)
    if first is None or second is None:
        return _free, None
    if predicate not in TWO_ANCHOR_PREDICATES:  # the reference fails looking up its tolerances
        raise SamplerPredicateError(f"unknown two-anchor predicate {predicate!r}")
    centers = (first.center, second.center)
    return lambda xy: TWO_ANCHOR_WEIGHT * _growth(two_anchor_distance(*centers, xy, predicate)), _NOWHERE


def _distance_term(anchors: _Anchors, relationship: str) -> tuple[Term, ZeroBox]:
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


def _directional_term(anchors: _Anchors, relationship: str) -> tuple[Term, ZeroBox]:
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


def _interaction_term(anchors: _Anchors, relationship: str) -> tuple[Term, ZeroBox]:
    predicate, name = split_anchor(relationship)
    if predicate not in INTERACTION_PREDICATES:
        return _free, None
    box = anchors.find(name)
    if box is None:
        return _free, None
    return lambda xy: INTERACTION_WEIGHT * _growth(interaction_distance(box, xy)), _NOWHERE


# Relationships are dispatched on their prefix, in this order; `look at` costs nothing.
_TERM_BUILDERS: tuple[tuple[tuple[str, ...], Callable[[_Anchors, str], tuple[Term, ZeroBox]] | None], ...] = (
    (TWO_ANCHOR_PREDICATES, _two_anchor_term),
    (tuple(SAMPLER_DISTANCE_THRESHOLDS), _distance_term),
    (DIRECTIONS, _directional_term),
    (INTERACTION_PREDICATES, _interaction_term),
    ((LOOK_AT,), None),
)


def _compile(scene: Scene, rewritten: Sequence[str], characters: Collection[str]) -> PositionCost:
    anchors = _Anchors(scene, characters)
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
    return _compile(scene, rewrite_relationships(relationships), characters or ())


def position_cost(
    scene: Scene,
    relationships: Sequence[str],
    points: np.ndarray | Sequence[Sequence[float]],
    *,
    characters: Collection[str] | None = None,
) -> np.ndarray:
    """float64 (N,): the sampler's cost at each point (N, 2); for tests, plots and comparisons."""
    return compile_cost(scene, relationships, characters=characters)(points)


# --- the seat rule and the annealer's start ------------------------------------------------------------------------


def seat_point(box: Box) -> np.ndarray:
    """float32 (2,): where a seated character's root goes, `depth · sit_offset_horizontal` along the front."""
    return box.center[:2] + box.front[:2] * (box.depth * box.sit_offset_horizontal)


def _seat_anchor(anchors: _Anchors, relationship: str) -> Box:
    box = anchors.find(split_anchor(relationship)[1])
    if box is None:
        raise SamplerSeatError(f"cannot sit or lie on a character: {relationship!r}")
    return box


def _fixed_seat(anchors: _Anchors, rewritten: Sequence[str]) -> np.ndarray | None:
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


def _anchor_start(anchors: _Anchors, rewritten: Sequence[str]) -> np.ndarray | None:
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


# --- the search ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Lattice:
    """Cell centres over a scene's allowed area, with what does not depend on the relationships precomputed."""

    points: np.ndarray  # float32 (nx, ny, 2)
    collisions: np.ndarray  # bool (nx, ny)
    allowed: np.ndarray  # bool (nx, ny); false only where float32 rounding crosses the edge

    @property
    def flat(self) -> np.ndarray:
        return self.points.reshape(-1, 2)

    def where(self, window: tuple[slice, slice], mask: np.ndarray) -> np.ndarray:
        """float32 (M, 2): `self.points[window][mask]` (x-major), gathered from the axes (a 3-D mask index is slow)."""
        i, j = np.nonzero(mask)
        picked = np.empty((len(i), 2), dtype=np.float32)
        picked[:, 0] = self.points[window[0], 0, 0][i]
        picked[:, 1] = self.points[0, window[1], 1][j]
        return picked

    def window(self, box: np.ndarray) -> tuple[slice, slice]:
        """The index ranges of the lattice points inside `box` [[min_x, min_y], [max_x, max_y]] (maybe empty)."""
        xs, ys = self.points[:, 0, 0], self.points[0, :, 1]
        return (
            slice(int(np.searchsorted(xs, box[0, 0], "left")), int(np.searchsorted(xs, box[1, 0], "right"))),
            slice(int(np.searchsorted(ys, box[0, 1], "left")), int(np.searchsorted(ys, box[1, 1], "right"))),
        )


@lru_cache(maxsize=16)
def _lattice_of(scene: Scene) -> _Lattice:
    low, high = scene.allowed_xy
    axes = [np.arange(low[i] + LATTICE_STEP / 2, high[i], LATTICE_STEP) for i in range(2)]
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).astype(np.float32)
    flat = points.reshape(-1, 2)
    shape = points.shape[:2]
    return _Lattice(points, floor_collisions(scene, flat).reshape(shape), scene.within_allowed(flat).reshape(shape))


_COMPASS = np.array([[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], [1, -1], [-1, 1], [-1, -1]], dtype=np.float64)


def _polish(cost: PositionCost, points: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compass search from each point at once: move to the best of 8 neighbours when it is strictly better, else
    halve that point's step. Returns the final float32 points and their costs."""
    points = points.astype(np.float32)
    values = values.copy()
    steps = np.full(len(points), LATTICE_STEP / 2)
    for _ in range(POLISH_MAX_ROUNDS):
        active = steps >= POLISH_STEP_FLOOR
        if not active.any():
            break
        moves = (points[active, None, :] + steps[active, None, None] * _COMPASS).astype(np.float32)
        trial = cost(moves.reshape(-1, 2)).reshape(moves.shape[:2])
        best = trial.argmin(axis=1)
        best_values = trial[np.arange(len(best)), best]
        improved = best_values < values[active]
        index = np.flatnonzero(active)
        points[index[improved]] = moves[improved, best[improved]]
        values[index[improved]] = best_values[improved]
        steps[index[~improved]] /= 2
    return points, values


def _smallest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of the `count` smallest values, ties in index order: `argsort(kind="stable")[:count]` without
    sorting the whole lattice."""
    if len(values) <= count:
        return np.argsort(values, kind="stable")
    kth = np.partition(values, count - 1)[count - 1]
    below = np.flatnonzero(values <= kth)  # every index the stable sort could put first, in index order
    return below[np.argsort(values[below], kind="stable")[:count]]


@lru_cache(maxsize=8)
def _disc_rows(radius_cells: float) -> tuple[tuple[int, int], ...]:
    """(di, w) for each row of the lattice disc of this radius: offsets (di, dj) with di² + dj² ≤ r² have |dj| ≤ w."""
    reach, squared = int(np.floor(radius_cells)), radius_cells * radius_cells
    return tuple(
        (di, max(dj for dj in range(reach + 1) if di * di + dj * dj <= squared))
        for di in range(-reach, reach + 1)
        if di * di <= squared
    )


def _clear_of_worse(optimal: np.ndarray, radius_cells: float) -> np.ndarray:
    """bool (nx, ny): optimal lattice points whose whole disc of `radius_cells` is optimal (outside counts as not).

    The disc is cut into rows: row `di` spans `|dj| <= w`, and it is all optimal where a running count of
    non-optimal cells along y does not grow across it."""
    reach = int(np.floor(radius_cells))
    nx, ny = optimal.shape
    padded = np.zeros((nx + 2 * reach, ny + 2 * reach), dtype=bool)
    padded[reach : reach + nx, reach : reach + ny] = optimal
    worse = np.zeros((padded.shape[0], padded.shape[1] + 1), dtype=np.int32)
    np.cumsum(~padded, axis=1, out=worse[:, 1:])
    rows: dict[int, np.ndarray] = {}
    clear = optimal.copy()
    for di, w in _disc_rows(radius_cells):
        if w not in rows:  # rows[w][i, j]: no non-optimal cell in padded[i, reach + j - w .. reach + j + w]
            rows[w] = worse[:, reach + w + 1 : reach + w + 1 + ny] == worse[:, reach - w : reach - w + ny]
        clear &= rows[w][reach + di : reach + di + nx]
    return clear


def _choose_near(candidates: np.ndarray, start: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One candidate, drawn with a preference for those nearest to `start`."""
    distance = np.linalg.norm(candidates.astype(np.float64) - start, axis=-1)
    weights = np.exp(-0.5 * ((distance - distance.min()) / PROXIMITY_SCALE) ** 2)
    return candidates[rng.choice(len(candidates), p=weights / weights.sum())]


@dataclass(frozen=True, eq=False)
class _Optimum:
    """What the search found for one set of relationships, before the start and the generator pick the answer:
    a strict minimum between lattice points (the answer whatever the start), or the optimal lattice points to draw
    from (those clear of worse points when there are any)."""

    point: np.ndarray | None
    candidates: np.ndarray  # float32 (M, 2), x-major; empty when `point` is set

    def choose(self, start: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.point if self.point is not None else _choose_near(self.candidates, start, rng)


def _optimal_points(
    cost: PositionCost, lattice: _Lattice, window: tuple[slice, slice], optimal: np.ndarray
) -> _Optimum:
    """Among the optimal points of a lattice block (every optimal point of the lattice lies in it), those clear of
    worse ones by the character radius, else by CLEARANCE_FALLBACK, else all of them."""
    for radius in (cost.scene.grid.cylinder_radius, CLEARANCE_FALLBACK):
        clear = _clear_of_worse(optimal, radius / LATTICE_STEP)
        if clear.any():
            return _Optimum(None, lattice.where(window, clear))
    return _Optimum(None, lattice.where(window, optimal))


def _search(cost: PositionCost) -> _Optimum:
    lattice = _lattice_of(cost.scene)
    if cost.zero_box is not None:
        # Every cost is 0 or at least 1 and zero-cost points lie in the box: if the box holds one, the lattice's
        # optimum is 0, no polish can beat it, and the optimal points are the box's zeros. Same answer, less work.
        # Only free points are evaluated: a collision (when avoided) or the boundary already makes a cost nonzero.
        window = lattice.window(cost.zero_box)
        free = lattice.allowed[window].copy()
        if cost.avoids_collisions:
            free &= ~lattice.collisions[window]
        if free.any():
            points = lattice.where(window, free)
            values = cost.summed(points, np.zeros(len(points), dtype=bool), np.ones(len(points), dtype=bool))
            zero = np.zeros(free.shape, dtype=bool)
            zero[free] = values == 0.0
            if zero.any():
                return _optimal_points(cost, lattice, window, zero)
    flat = lattice.flat
    values = cost.summed(flat, lattice.collisions.ravel(), lattice.allowed.ravel())
    lattice_best = values.min()
    tolerance = 1e-9 * max(1.0, abs(lattice_best))

    seeds = _smallest(values, POLISHED_POINTS)
    polished, polished_values = _polish(cost, flat[seeds], values[seeds])
    if polished_values.min() < lattice_best - tolerance:  # a strict minimum between lattice points
        return _Optimum(polished[polished_values.argmin()], np.empty((0, 2), dtype=np.float32))

    optimal = (values <= lattice_best + tolerance).reshape(lattice.points.shape[:2])
    return _optimal_points(cost, lattice, (slice(None), slice(None)), optimal)


# --- the reference's annealer ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Annealing:
    """What one annealing produced: the last accepted point and how the search went."""

    point: np.ndarray  # float32 (2,): the last accepted point (the start if nothing was accepted)
    cost: float  # its cost
    proposals: int
    accepted: int
    path: tuple[np.ndarray, ...] = ()  # the accepted points in order, when asked for (tests, plots)


def anneal(
    cost: Callable[[np.ndarray], float], start: np.ndarray, rng: np.random.Generator, *, record: bool = False
) -> Annealing:
    """The reference's simulated annealing from `start` (docs/reference.md#position-sampler): each proposal draws a
    normal pair and then one uniform from `rng`, accepted or not. `cost` scores one float32 point (2,); `record` keeps
    every accepted point."""
    current = np.array(start, dtype=np.float32).reshape(2)  # a copy: the start may be a view of a box's centre
    current_cost = cost(current)
    temperature = START_TEMPERATURE
    proposals = accepted = converged = 0
    path: list[np.ndarray] = []
    while converged < CONVERGENCE_MOVES:
        proposal = current + rng.normal(0.0, MOVE_STD, 2).astype(np.float32)
        proposal_cost = cost(proposal)
        # Python floats: exp(-inf) is 0 and inf - inf is nan, which never beats the uniform draw, as in the reference
        chance = 1.0 if proposal_cost < current_cost else math.exp((current_cost - proposal_cost) / temperature)
        if chance > rng.random():
            change = abs(proposal_cost - current_cost) / (current_cost + RELATIVE_EPSILON)  # nan from ∞ resets
            current, current_cost = proposal, proposal_cost
            converged = converged + 1 if change < CONVERGENCE_CHANGE else 0
            accepted += 1
            temperature = max(temperature * COOLING, TEMPERATURE_FLOOR)
            if record:
                path.append(current)
        proposals += 1
        if proposals >= MAX_PROPOSALS:
            break
    return Annealing(current, current_cost, proposals, accepted, tuple(path))


def point_cost(cost: PositionCost) -> Callable[[np.ndarray], float]:
    """The cost of one float32 point (2,) as a Python float, the annealer's view of a `PositionCost`."""

    def one(point: np.ndarray) -> float:
        return float(cost(point.reshape(1, 2))[0])

    return one


@lru_cache(maxsize=OPTIMA_CACHED)
def _optimum(scene: Scene, rewritten: tuple[str, ...], characters: frozenset[str]) -> _Optimum:
    """The search's result for these relationships, kept for the next run that writes the same ones (the repeats
    of a case, or another character with the same relationships): only the draw differs between them."""
    return _search(_compile(scene, rewritten, characters))


def sample_position(
    scene: Scene,
    relationships: Sequence[str],
    *,
    characters: Collection[str] | None = None,
    rng: np.random.Generator,
    sampler: SamplerName | str = SamplerName.REFERENCE,
) -> tuple[float, float]:
    """Where a character with these relationships stands: (x, y), float32 values as Python floats.

    `characters` are the names a relationship may use as anchors (free of cost). `rng` makes the result
    reproducible; the runner derives it from the seed and the run key. `sampler` picks the reference's annealer or
    edsb's optimiser. Raises SamplerAnchorError (a KeyError), SamplerPredicateError (a ValueError) or
    SamplerSeatError where the reference raises.
    """
    sampler = SamplerName(sampler)
    rewritten = rewrite_relationships(relationships)
    names = frozenset(characters or ())
    anchors = _Anchors(scene, names)
    seat = _fixed_seat(anchors, rewritten)
    if seat is not None:
        return float(seat[0]), float(seat[1])
    start = _anchor_start(anchors, rewritten)
    if sampler is SamplerName.REFERENCE:
        cost = _compile(scene, rewritten, names)  # validates every relationship before the start is drawn
        if start is None:
            start = _random_start(scene, rng)
        x, y = anneal(point_cost(cost), start, rng).point
        return float(x), float(y)
    optimum = _optimum(scene, tuple(rewritten), names)
    if start is None:
        start = _random_start(scene, rng)
    x, y = optimum.choose(np.asarray(start, dtype=np.float64), rng)
    return float(x), float(y)


def sampling_terms(scene: Scene, relationships: Mapping[str, Sequence[str]], *, characters: Collection[str]) -> int:
    """The cost terms sampling these characters evaluates (see MAX_SAMPLING_TERMS), counted as `sample_positions`
    meets them: up to the first character whose relationships it refuses, where sampling stops."""
    names = frozenset(characters)
    anchors = _Anchors(scene, names)
    total = 0
    for wanted in relationships.values():
        rewritten = rewrite_relationships(wanted)
        try:
            if _fixed_seat(anchors, rewritten) is not None:
                continue
            _anchor_start(anchors, rewritten)
            total += 1 + len(_compile(scene, rewritten, names).terms)
        except RunError:
            break
    return total


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


def sample_positions(
    scene: Scene,
    relationships: Mapping[str, Sequence[str]],
    *,
    characters: Collection[str],
    rng: np.random.Generator,
    sampler: SamplerName | str = SamplerName.REFERENCE,
) -> dict[str, tuple[float, float]]:
    """Each character's point, in the mapping's order, drawn one after the other from `rng`."""
    return {
        name: sample_position(scene, wanted, characters=characters, rng=rng, sampler=sampler)
        for name, wanted in relationships.items()
    }


def line_sampler(sampler: SamplerName | str, seed: int) -> PositionSampler:
    """`edsb score`'s sampler: the characters of input line `n` are sampled from a generator of the seed and `n`,
    so repeated lines are independent draws and each is reproducible."""
    chosen = SamplerName(sampler)

    def sample(
        scene: Scene, relationships: Mapping[str, Sequence[str]], characters: Collection[str], line: int
    ) -> dict[str, tuple[float, float]]:
        rng = generator_for(f"{seed}/line-{line}")
        return sample_positions(scene, relationships, characters=characters, rng=rng, sampler=chosen)

    return sample


def warm_scene(scene: Scene, sampler: SamplerName | str) -> None:
    """Compute what sampling in this scene keeps for every plan (the free grid of the random start; the optimiser's
    lattice), so that a plan's own work can be timed apart from it."""
    occupancy_grid_of(scene)
    if SamplerName(sampler) is SamplerName.OPTIMAL:
        _lattice_of(scene)


def _random_start(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    """float32 (2,): a free grid cell drawn uniformly, the annealer's start when no relationship has an object."""
    free = occupancy_grid_of(scene).free_points()
    return free[rng.integers(len(free))]
