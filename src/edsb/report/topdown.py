"""Top-down floor plans (matplotlib): where a plan put a character, where it should have gone, what was taken.

One picture per case and level: every object's oriented footprint with its name and, for oriented objects, an
arrow to its front; the occupancy grid faintly; the characters of the case at the anchors their relationships name;
the expected region (the anchors of the expected condition, or for PI cases the area where the judge's own position
check passes, evaluated on a dense grid); and optionally a plan (the anchors it named, or its sampled point).

What gets marked is computed once (`case_marks`, `plan_marks`) and drawn either by matplotlib (`edsb show`) or as an
SVG layer over a cached background (the HTML report), so both show the same things.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edsb.data.models import TestCase
from edsb.errors import UsageError
from edsb.geometry.collision import stands_on_floor
from edsb.geometry.grid import occupancy_grid_of
from edsb.geometry.relations import LOOK_AT, TWO_ANCHOR_PREDICATES, split_anchor, split_two_anchors
from edsb.geometry.scene import Scene
from edsb.results import RunResult
from edsb.scoring.conditions import ConditionSyntaxError, iter_atoms, parse_condition
from edsb.scoring.judge import Judge
from edsb.scoring.verdict import PlanRejected, Verdict

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Colours (RGB in 0..1) shared by the matplotlib and SVG renderings.
EXPECTED_COLOUR = (0.13, 0.63, 0.25)
PLAN_COLOUR = (0.85, 0.2, 0.1)
CHARACTER_COLOUR = (0.15, 0.35, 0.8)
OBJECT_FILL = (0.82, 0.74, 0.58)
EXPECTED_AREA_ALPHA = 0.4
#: Spacing (m) of the grid on which a PI case's expected area is evaluated by the judge.
AREA_STEP = 0.04


def _require_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("pictures need matplotlib: pip install 'edsb[plots]'") from None
    return plt


def anchors_of(relationship: str) -> list[str]:
    """Object names a relationship or condition atom refers to (one or two anchors; `look at` may name a person)."""
    if relationship.startswith(TWO_ANCHOR_PREDICATES):
        try:
            _, first, second = split_two_anchors(relationship)
        except ValueError:
            return []
        return [first, second]
    return [split_anchor(relationship)[1]]


def condition_anchors(condition: str | None) -> list[str]:
    if not condition:
        return []
    try:
        atoms = list(iter_atoms(parse_condition(condition)))
    except ConditionSyntaxError:
        return []
    return list(dict.fromkeys(anchor for atom in atoms for anchor in anchors_of(atom)))


@dataclass
class Marks:
    """Things to draw over a scene: highlighted objects, labelled points and (PI) a pass mask on a grid."""

    objects: dict[str, str] = field(default_factory=dict)  # object name -> "expected" | "plan"
    points: list[tuple[str, float, float, str]] = field(default_factory=list)  # (label, x, y, "character"|"plan")
    area: tuple[np.ndarray, tuple[float, float, float, float]] | None = None  # mask (ny, nx) and extent


def scene_extent(scene: Scene, pad: float = 0.3) -> tuple[float, float, float, float]:
    low, high = scene.bounds[0].astype(float), scene.bounds[1].astype(float)
    return float(low[0] - pad), float(high[0] + pad), float(low[1] - pad), float(high[1] + pad)


def expected_area(judge: Judge, step: float = AREA_STEP) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """Where a PI plan would pass: the judge's own position check on a grid of cell centres over the scene.
    Returns the mask (rows = y ascending, columns = x) and the extent (x0, x1, y0, y1) of the cells."""
    x0, x1, y0, y1 = scene_extent(judge.scene, pad=0.0)
    xs = np.arange(x0 + step / 2, x1, step)
    ys = np.arange(y0 + step / 2, y1, step)
    points = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)
    mask = judge.position_pass_mask(points).reshape(len(ys), len(xs))
    return mask, (float(xs[0] - step / 2), float(xs[-1] + step / 2), float(ys[0] - step / 2), float(ys[-1] + step / 2))


def case_marks(case: TestCase, level: int, scene: Scene) -> Marks:
    """The characters of the case where its current states put them, and the expected region."""
    marks = Marks()
    seen: dict[str, int] = {}
    for state in case.states_at(level):
        anchor = next(
            (a for r in state.position for a in anchors_of(r) if a in scene.by_name and not r.startswith(LOOK_AT)),
            None,
        )
        if anchor is None:
            continue
        box = scene.by_name[anchor]
        shift = 0.25 * seen.get(anchor, 0)
        seen[anchor] = seen.get(anchor, 0) + 1
        marks.points.append((state.name, float(box.center[0]) + shift, float(box.center[1]) + shift, "character"))
    if case.is_position_case:
        try:
            marks.area = expected_area(Judge(case, level, scene))
        except PlanRejected:  # a broken case: nothing to shade
            marks.area = None
    else:
        for expected in case.expected_plans:
            for anchor in condition_anchors(expected.relationships):
                if anchor in scene.by_name:
                    marks.objects[anchor] = "expected"
    return marks


def plan_marks(plan: object, scene: Scene) -> Marks:
    """The anchors a plan named and its sampled points; anything malformed is simply not drawn."""
    marks = Marks()
    if not isinstance(plan, Mapping):
        return marks
    for name, entry in plan.items():
        if not isinstance(entry, Mapping):
            continue
        position = entry.get("sampled_position")
        if isinstance(position, list | tuple) and len(position) == 2:
            try:
                x, y = float(position[0]), float(position[1])
            except (TypeError, ValueError):
                x = y = float("nan")
            if np.isfinite(x) and np.isfinite(y):
                marks.points.append((str(name), x, y, "plan"))
                continue
        relationships = entry.get("relationships")
        first: str | None = None
        for relationship in relationships if isinstance(relationships, list) else []:
            if not isinstance(relationship, str) or relationship.startswith(LOOK_AT):
                continue
            for anchor in anchors_of(relationship):
                if anchor in scene.by_name:
                    marks.objects[anchor] = "plan"
                    first = first or anchor
        if first is not None:
            box = scene.by_name[first]
            marks.points.append((str(name), float(box.center[0]), float(box.center[1]) - 0.2, "plan"))
    return marks


def verdict_title(case: TestCase, level: int, verdict: Verdict | None, status: str | None = None) -> str:
    head = f"case {case.id} ({', '.join(case.tags)}, {case.scene_name}) · level {level}"
    if verdict is None and status is None:
        return head
    if verdict is not None:
        status = "passed" if verdict.passed else ("error" if verdict.errored else "failed")
    explanation = verdict.explain() if verdict is not None else None
    return f"{head} · {status.upper() if status else ''}" + (f"\n{explanation}" if explanation else "")


# --- labels --------------------------------------------------------------------------------------------------------
Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in scene coordinates (y up)
Measure = Callable[[str], tuple[float, float]]  # a label's width and height as drawn, in scene units
#: Width of a label per character, in font sizes: a little over DejaVu Sans' mean advance; the SVG report draws each
#: label at exactly this width (`textLength`), so the boxes below are the boxes drawn.
LABEL_ADVANCE = 0.6
_SIDES = ((1, 0), (1, 1), (1, -1), (-1, 0), (-1, 1), (-1, -1), (0, 1), (0, -1))  # right first, then left, above, below
_RINGS = (1.0, 2.5, 4.0, 6.0)
# Beyond the rings, spots in 16 directions at every further distance.
_FAR = [(float(np.cos(a)), float(np.sin(a))) for a in np.linspace(0.0, 2 * np.pi, 16, endpoint=False)]


def _overlap(a: Box, b: Box) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _inside(box: Box, bounds: Box) -> bool:
    return box[0] >= bounds[0] and box[1] >= bounds[1] and box[2] <= bounds[2] and box[3] <= bounds[3]


def _candidates(
    x: float, y: float, width: float, height: float, size: float, clearance: float, centred: bool, bounds: Box
) -> Iterable[Box]:
    """Spots inside `bounds` for a label of this size anchored at (x, y), nearest first: on the anchor (`centred`),
    then beside it on growing rings (right, left, above, below), then in every direction out to the far corner."""
    return (box for box in _spots(x, y, width, height, size, clearance, centred, bounds) if _inside(box, bounds))


def _spots(
    x: float, y: float, width: float, height: float, size: float, clearance: float, centred: bool, bounds: Box
) -> Iterable[Box]:
    if centred:
        yield (x - width / 2, y - height / 2, x + width / 2, y + height / 2)
    for ring in _RINGS:
        gap = clearance + 0.15 * size + (ring - 1.0) * height
        for dx, dy in _SIDES:
            left = x + gap if dx > 0 else x - gap - width if dx < 0 else x - width / 2
            bottom = y - height / 2 + dy * (height / 2 + gap) if dx else y + gap if dy > 0 else y - gap - height
            yield (left, bottom, left + width, bottom + height)
    reach = float(np.hypot(bounds[2] - bounds[0], bounds[3] - bounds[1]))
    gap = clearance + 0.15 * size + _RINGS[-1] * height
    while gap < reach:
        for cos, sin in _FAR:
            cx, cy = x + cos * (gap + width / 2), y + sin * (gap + height / 2)
            yield (cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2)
        gap += height


def place_labels(
    labels: Iterable[tuple[str, float, float]],
    size: float,
    bounds: Box,
    *,
    clearance: float = 0.0,
    taken: Iterable[Box] = (),
    centred: bool = False,
    measure: Measure | None = None,
) -> list[Box]:
    """A box for each label (text, anchor x, anchor y) that overlaps no box placed before it (`taken` included) and
    stays inside `bounds`: on the anchor itself if `centred`, else beside it at `clearance` (a marker's radius),
    trying right, left, above and below at growing distances, then farther out in every direction (such a label
    gets a leader line: `needs_leader`); only where the picture has no free spot left, the least covered one.
    `measure` gives a label's drawn size (matplotlib measures its text); by default it is `LABEL_ADVANCE` font
    sizes a character wide and 1.2 font sizes high, as the SVG report draws it. Dense clusters (seats around a
    table, appliances on a counter, a bottle on a table) stay readable this way."""
    placed = list(taken)
    boxes: list[Box] = []
    for text, x, y in labels:
        width, height = measure(text) if measure else (LABEL_ADVANCE * size * len(text), 1.2 * size)

        spot = (x, y, width, height, size, clearance, centred, bounds)
        best = next((c for c in _candidates(*spot) if not any(_overlap(c, other) for other in placed)), None)
        if best is None:
            best = min(_candidates(*spot), key=lambda c: sum(_overlap(c, other) for other in placed), default=None)
        if best is None:  # larger than the picture: centred on its anchor
            best = (x - width / 2, y - height / 2, x + width / 2, y + height / 2)
        boxes.append(best)
        placed.append(best)
    return boxes


def needs_leader(box: Box, x: float, y: float, size: float, clearance: float = 0.0) -> bool:
    """Whether a label placed at `box` is far enough from its anchor (x, y) to need a line to it: beyond the first
    ring of spots that `place_labels` tries."""
    dx = max(box[0] - x, 0.0, x - box[2])
    dy = max(box[1] - y, 0.0, y - box[3])
    return float(np.hypot(dx, dy)) > clearance + 0.15 * size + 0.5 * (box[3] - box[1])


def leader_end(box: Box, x: float, y: float) -> tuple[float, float]:
    """The point of `box` nearest to the anchor (x, y): where a leader line from the anchor meets the label."""
    return min(max(x, box[0]), box[2]), min(max(y, box[1]), box[3])


# --- matplotlib ------------------------------------------------------------------------------------------------------
CHARACTER_MARKER_PT2, PLAN_MARKER_PT2 = 30.0, 50.0  # scatter sizes (points²) of a character dot and a plan star


def draw_scene(
    ax: Axes,
    scene: Scene,
    *,
    highlight: Mapping[str, str] | None = None,
    colours: Mapping[str, tuple[float, float, float]] | None = None,
    grid: bool = True,
) -> None:
    """Footprints (floor objects filled, others dashed), fronts, and the occupancy grid faintly; the names come last,
    from `label_picture`. `colours` fills objects by name (regions); `highlight` outlines objects as expected or
    planned."""
    from matplotlib.patches import Polygon

    highlight = highlight or {}
    if grid:
        occupancy = occupancy_grid_of(scene)
        occupied = occupancy.points[occupancy.occupied]
        if len(occupied):
            ax.scatter(occupied[:, 0], occupied[:, 1], s=1.0, c="0.55", alpha=0.35, linewidths=0, zorder=1)
    for box in scene.objects:
        role = highlight.get(box.name)
        edge = {"expected": EXPECTED_COLOUR, "plan": PLAN_COLOUR}.get(role or "", (0.35, 0.3, 0.25))
        fill = (colours or {}).get(box.name, OBJECT_FILL)
        floor = stands_on_floor(box)
        ax.add_patch(
            Polygon(
                box.footprint.astype(float),
                closed=True,
                facecolor=(*fill, 0.55 if floor else 0.25),
                edgecolor=edge,
                linewidth=2.0 if role else 0.6,
                linestyle="-" if floor or role else "--",
                zorder=3 if role else 2,
            )
        )
        if box.has_orientation:
            cx, cy = float(box.center[0]), float(box.center[1])
            reach = min(box.half_depth, 0.6) + 0.15
            ax.annotate(
                "",
                xy=(cx + float(box.front[0]) * reach, cy + float(box.front[1]) * reach),
                xytext=(cx, cy),
                arrowprops={"arrowstyle": "-|>", "color": "0.3", "lw": 0.5, "mutation_scale": 5},
                zorder=4,
            )


def draw_marks(ax: Axes, marks: Marks) -> None:
    """The expected area (PI) and the markers of characters and plan points of `marks` (object highlights go
    through draw_scene, labels through label_picture)."""
    if marks.area is not None:
        mask, extent = marks.area
        rgba = np.zeros((*mask.shape, 4))
        rgba[mask] = (*EXPECTED_COLOUR, EXPECTED_AREA_ALPHA)
        ax.imshow(rgba, origin="lower", extent=extent, interpolation="nearest", zorder=0.5)
    for _, x, y, kind in marks.points:
        plan = kind == "plan"
        ax.scatter(
            [x],
            [y],
            s=PLAN_MARKER_PT2 if plan else CHARACTER_MARKER_PT2,
            c=[PLAN_COLOUR if plan else CHARACTER_COLOUR],
            marker="*" if plan else "o",
            zorder=7,
            edgecolors="white",
        )


def _measure(ax: Axes, renderer: Any, per_px: tuple[float, float], fontsize: float) -> Measure:
    """A text's size in scene units, measured as matplotlib draws it in `ax` at `fontsize`."""

    def size(text: str) -> tuple[float, float]:
        artist = ax.text(0.0, 0.0, text, fontsize=fontsize)
        extent = artist.get_window_extent(renderer)
        artist.remove()
        return extent.width * per_px[0], extent.height * per_px[1]

    return size


def label_picture(
    ax: Axes,
    scene: Scene,
    marks: Iterable[Marks] = (),
    *,
    names: bool = True,
    name_size: float = 5.0,
    mark_size: float = 6.0,
) -> None:
    """Object names (if `names`) and the labels of `marks`, placed by `place_labels` in the axes' final layout
    (call it last), each measured as matplotlib draws it: none covers another label, none a marker, none leaves the
    axes; one moved away from its anchor gets a thin leader line. The same placement as the HTML report's."""
    figure = ax.figure
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    bounds = (x0, y0, x1, y1)
    per_px = ((x1 - x0) / ax.bbox.width, (y1 - y0) / ax.bbox.height)  # scene units per pixel, across and up
    per_pt = per_px[0] * figure.dpi / 72
    measure = partial(_measure, ax, renderer, per_px)

    def draw(text: str, box: Box, x: float, y: float, fontsize: float, colour: Any, clearance: float) -> None:
        centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
        ax.text(*centre, text, fontsize=fontsize, color=colour, ha="center", va="center", zorder=8)
        if needs_leader(box, x, y, fontsize * per_pt, clearance):
            end = leader_end(box, x, y)
            ax.plot([x, end[0]], [y, end[1]], color=colour, linewidth=0.4, alpha=0.8, zorder=6)

    # Markers first: in a picture of its own, no name needs to sit under a character (the HTML report shares one
    # name layer between pictures, so there names come first).
    points = [point for mark in marks for point in mark.points]
    radii = [
        (np.sqrt(PLAN_MARKER_PT2 if kind == "plan" else CHARACTER_MARKER_PT2) / 2 + 1) * per_pt for *_, kind in points
    ]
    taken = [(x - r, y - r, x + r, y + r) for (_, x, y, _), r in zip(points, radii, strict=True)]
    if names:
        labels = [(box.name, float(box.center[0]), float(box.center[1])) for box in scene.objects]
        placed = place_labels(labels, name_size * per_pt, bounds, centred=True, taken=taken, measure=measure(name_size))
        for (text, x, y), box in zip(labels, placed, strict=True):
            draw(text, box, x, y, name_size, "0.1", 0.0)
        taken += placed
    for (text, x, y, kind), radius in zip(points, radii, strict=True):
        size = mark_size * per_pt
        (box,) = place_labels([(text, x, y)], size, bounds, clearance=radius, taken=taken, measure=measure(mark_size))
        taken.append(box)
        draw(text, box, x, y, mark_size, CHARACTER_COLOUR if kind == "character" else PLAN_COLOUR, radius)


def floor_plan_figure(
    scene: Scene,
    marks: Iterable[Marks] = (),
    *,
    title: str = "",
    width_in: float = 9.0,
    chrome: bool = True,
    names: bool = True,
) -> Figure:
    """A figure of the scene with `marks`. Without `chrome` the axes fill the figure exactly (no title, ticks or
    legend, and object names only if `names`), so a data point maps linearly to a pixel and an SVG layer can be laid
    over the image."""
    plt = _require_matplotlib()
    marks = list(marks)
    x0, x1, y0, y1 = scene_extent(scene)
    height_in = width_in * (y1 - y0) / (x1 - x0)
    highlight: dict[str, str] = {}
    for mark in marks:
        highlight.update(mark.objects)
    if chrome:
        figure, ax = plt.subplots(figsize=(width_in, height_in + 1.0))
    else:
        figure = plt.figure(figsize=(width_in, height_in))
        ax = figure.add_axes((0, 0, 1, 1))
        ax.set_axis_off()
    draw_scene(ax, scene, highlight=highlight)
    for mark in marks:
        draw_marks(ax, mark)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal" if chrome else "auto")
    if chrome:
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.tick_params(labelsize=7)
        _legend(ax, marks)
        if title:
            ax.set_title(title, fontsize=9)
        figure.tight_layout()
        ax.apply_aspect()  # the axes' final box, which the labels are measured in
    label_picture(ax, scene, marks, names=names or chrome, name_size=5.0 if chrome else 7.0)
    return figure


def _legend(ax: Axes, marks: list[Marks]) -> None:
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Artist] = [
        Patch(facecolor=(*OBJECT_FILL, 0.55), edgecolor="0.3", label="object (dashed: not on the floor)")
    ]
    if any(m.area is not None for m in marks):
        handles.append(Patch(facecolor=(*EXPECTED_COLOUR, EXPECTED_AREA_ALPHA), label="where the judge accepts"))
    if any("expected" in m.objects.values() for m in marks):
        handles.append(Patch(facecolor="none", edgecolor=EXPECTED_COLOUR, linewidth=2, label="expected anchor"))
    if any("plan" in m.objects.values() for m in marks):
        handles.append(Patch(facecolor="none", edgecolor=PLAN_COLOUR, linewidth=2, label="anchor the plan named"))
    kinds = {kind for m in marks for *_, kind in m.points}
    if "character" in kinds:
        handles.append(Line2D([], [], marker="o", ls="", color=CHARACTER_COLOUR, label="character (history)"))
    if "plan" in kinds:
        handles.append(Line2D([], [], marker="*", ls="", color=PLAN_COLOUR, markersize=9, label="plan"))
    ax.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def save_figure(figure: Figure, path: Path | str, dpi: int = 150) -> Path:
    plt = _require_matplotlib()
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        plt.close(figure)
        raise UsageError(f"{path}: the picture must be .png, .svg or .pdf")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi, bbox_inches="tight" if figure.axes and figure.axes[0].axison else None)
    plt.close(figure)
    return path


def case_figure(
    case: TestCase, level: int, scene: Scene, plan: Any = None, *, verdict: Verdict | None = None, has_plan=False
) -> Figure:
    """The `edsb show` picture: the case, its expected region and (if `has_plan`) the plan with its verdict."""
    marks = [case_marks(case, level, scene)]
    if has_plan:
        marks.append(plan_marks(plan, scene))
        if verdict is None:
            verdict = Judge(case, level, scene).judge(plan)
    return floor_plan_figure(scene, marks, title=verdict_title(case, level, verdict))


def result_figure(case: TestCase, level: int, scene: Scene, result: RunResult) -> Figure:
    """The picture of one run from its result: the plan judged again (same verdict, with its reason), or, for a
    run that produced no plan, the case with the run's status and error."""
    if result.plan is None:
        title = verdict_title(case, level, None, str(result.status)) + (f"\n{result.error}" if result.error else "")
        return floor_plan_figure(scene, [case_marks(case, level, scene)], title=title)
    return case_figure(case, level, scene, result.plan, has_plan=True)


# --- regions ---------------------------------------------------------------------------------------------------------
def regions_figure(scene: Scene) -> Figure:
    """The scene with its DBSCAN regions (scene-graph clustering) filled in one colour each; noise stays plain."""
    from edsb.geometry.regions import object_clusters

    plt = _require_matplotlib()
    clusters = object_clusters(scene)
    palette = plt.get_cmap("tab10")
    colours: dict[str, tuple[float, float, float]] = {
        name: palette(index % 10)[:3] for index, names in enumerate(clusters) for name in names
    }
    x0, x1, y0, y1 = scene_extent(scene)
    figure, ax = plt.subplots(figsize=(9.0, 9.0 * (y1 - y0) / (x1 - x0) + 1.0))
    draw_scene(ax, scene, colours=colours, grid=False)
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    ax.tick_params(labelsize=7)
    ax.set_title(f"{scene.name}: {len(scene.objects)} objects, {len(clusters)} regions (DBSCAN)", fontsize=9)
    figure.tight_layout()
    ax.apply_aspect()
    label_picture(ax, scene)
    return figure
