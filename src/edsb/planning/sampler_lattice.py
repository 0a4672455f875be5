"""edsb's optimiser of the sampler's cost (`--sampler optimal`): a lattice search that always returns an optimal
point.

The cost is evaluated at once on a 5 cm lattice over the whole allowed area (collisions on it are cached per scene),
the best lattice points are polished by a vectorised pattern search, and the answer is an optimal point rather than
the annealer's last accepted one. Among equally good points it prefers those whose neighbourhood (the scene's
character radius, else 0.1 m) is optimal too, then points near the annealer's start, drawn at random from the
caller's generator. So a consistent set of relationships always lands in its zero-cost region: the ceiling of what
the relationships allow, not the paper's number.

Two shortcuts leave every answer as it was. Each term knows a box holding all the points where it is zero; when the
lattice block inside the boxes' intersection holds a zero-cost point, only that block's free points are evaluated
(every cost is 0 or at least 1, so nothing outside it or between lattice points can do better). And the search
result is kept per (scene, relationships, characters), so the repeats of a case only make the draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from edsb.geometry.collision import floor_collisions
from edsb.geometry.scene import Scene
from edsb.planning.sampler_cost import PositionCost, compile_rewritten

LATTICE_STEP = 0.05  # metres between lattice points; the judge's tolerances are 0.1 m and more
POLISHED_POINTS = 16  # best lattice points handed to the pattern search
POLISH_STEP_FLOOR = 1e-5  # the pattern search stops once its step is below this (float32 spacing is ~1e-6 m)
POLISH_MAX_ROUNDS = 200
OPTIMA_CACHED = 64  # relationship sets whose search result is kept (a few hundred lattice points each, typically)
CLEARANCE_FALLBACK = 0.1  # neighbourhood radius tried when the character radius leaves no optimal point
PROXIMITY_SCALE = 1.0  # metres: how quickly preference fades with distance from the start beyond the nearest point


@dataclass(frozen=True, eq=False)
class Lattice:
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
def lattice_of(scene: Scene) -> Lattice:
    """The scene's lattice, built once per scene: its collision test is the costly part."""
    low, high = scene.allowed_xy
    axes = [np.arange(low[i] + LATTICE_STEP / 2, high[i], LATTICE_STEP) for i in range(2)]
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).astype(np.float32)
    flat = points.reshape(-1, 2)
    shape = points.shape[:2]
    return Lattice(points, floor_collisions(scene, flat).reshape(shape), scene.within_allowed(flat).reshape(shape))


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
class Optimum:
    """What the search found for one set of relationships, before the start and the generator pick the answer:
    a strict minimum between lattice points (the answer whatever the start), or the optimal lattice points to draw
    from (those clear of worse points when there are any)."""

    point: np.ndarray | None
    candidates: np.ndarray  # float32 (M, 2), x-major; empty when `point` is set

    def choose(self, start: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.point if self.point is not None else _choose_near(self.candidates, start, rng)


def _optimal_points(cost: PositionCost, lattice: Lattice, window: tuple[slice, slice], optimal: np.ndarray) -> Optimum:
    """Among the optimal points of a lattice block (every optimal point of the lattice lies in it), those clear of
    worse ones by the character radius, else by CLEARANCE_FALLBACK, else all of them."""
    for radius in (cost.scene.grid.cylinder_radius, CLEARANCE_FALLBACK):
        clear = _clear_of_worse(optimal, radius / LATTICE_STEP)
        if clear.any():
            return Optimum(None, lattice.where(window, clear))
    return Optimum(None, lattice.where(window, optimal))


def search(cost: PositionCost) -> Optimum:
    """What the optimiser finds for one cost, before the start and the generator pick the answer."""
    lattice = lattice_of(cost.scene)
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
        return Optimum(polished[polished_values.argmin()], np.empty((0, 2), dtype=np.float32))

    optimal = (values <= lattice_best + tolerance).reshape(lattice.points.shape[:2])
    return _optimal_points(cost, lattice, (slice(None), slice(None)), optimal)


@lru_cache(maxsize=OPTIMA_CACHED)
def optimum(scene: Scene, rewritten: tuple[str, ...], characters: frozenset[str]) -> Optimum:
    """The search's result for these relationships, kept for the next run that writes the same ones (the repeats
    of a case, or another character with the same relationships): only the draw differs between them."""
    return search(compile_rewritten(scene, rewritten, characters))
