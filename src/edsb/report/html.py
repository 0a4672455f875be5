"""`edsb report RUN_DIR --format html`: one self-contained page to browse a run (no network, no other files).

The page holds the paper's tables with intervals, the figures by tag and level, a case × level × repeat grid per
variant coloured by verdict or error kind, and a drill-down per run (instruction, prompts, replies, executed code,
plan, verdict and reason, top-down picture).

Kept small for a full Table 1 run (1,800 runs): prompt texts repeat across runs (system prompts, few-shot examples,
scene descriptions), so every message is split into its blank-line-separated sections and each distinct section is
stored once in a JSON table that a few lines of inline script join back when a run is opened. Pictures are layered:
each scene is drawn once by matplotlib (an inline PNG), each (case, level) once as SVG (characters, expected anchors,
the judge's accepted area for PI), and each run adds only its plan's few SVG shapes.
"""

from __future__ import annotations

import base64
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from edsb.data.benchmark import Benchmark
from edsb.data.models import TestCase
from edsb.data.perturb import perturbation_label
from edsb.errors import UsageError
from edsb.geometry.scene import Scene, load_scene
from edsb.llm.transcripts import TranscriptRecord, transcripts_by_run
from edsb.report.formats import variant_rank
from edsb.report.render import (
    POWER_TITLE,
    SAMPLER_MISS_HEADER,
    SAMPLER_MISS_TITLE,
    power_header,
    power_rows,
    sampler_miss_rows,
)
from edsb.report.samples import executed_code
from edsb.report.summary import LEVEL_ROWS, TAG_COLUMNS, build_summary, paper_rows
from edsb.report.summary_types import RunSummary
from edsb.report.topdown import (
    CHARACTER_COLOUR,
    EXPECTED_AREA_ALPHA,
    EXPECTED_COLOUR,
    PLAN_COLOUR,
    Box,
    Marks,
    case_marks,
    floor_plan_figure,
    leader_end,
    needs_leader,
    place_labels,
    plan_marks,
    scene_extent,
)
from edsb.results import RunKey, RunResult
from edsb.results.rundir import RunDirectory

STATUS_COLOURS = {"passed": "#2e9d4a", "failed": "#d0392b", "incomplete": "#9e9e9e"}
# Error kinds, in order of first appearance in a report: colours far apart from each other and from the status
# colours above (no green, red or grey), the first ones the most distinct.
ERROR_PALETTE = (
    "#ff8c00",  # orange
    "#1f5fd6",  # blue
    "#7b2fbe",  # purple
    "#ffe119",  # yellow
    "#00c8d7",  # cyan
    "#6b3e12",  # brown
    "#ff6fcf",  # pink
    "#0b1f5c",  # navy
    "#8fd400",  # lime
    "#000000",  # black
)
PICTURE_WIDTH_IN = 5.0
PICTURE_DPI = 80
PICTURE_PX = PICTURE_WIDTH_IN * PICTURE_DPI  # a drill-down picture's width on the page (the template's .picture)
# Sizes in pixels of the picture: object names, character and plan labels, character dots and plan stars (radius).
NAME_PX, LABEL_PX, CHARACTER_PX, PLAN_PX = 7.5, 10.0, 4.0, 9.0


def error_kind_colours(kinds: Iterable[str]) -> dict[str, str]:
    """A colour per error kind (sorted by name): distinct ones while the palette lasts, then it starts over."""
    return {kind: ERROR_PALETTE[i % len(ERROR_PALETTE)] for i, kind in enumerate(sorted(set(kinds)))}


def run_anchor(key: RunKey) -> str:
    """The id of a run's drill-down on the page (`report.html#run-ours__tc13-d0-r0`), which `edsb compare
    --format html` links to."""
    return "run-" + key.file_stem


def load_template(name: str) -> Any:
    """A page template of `report/templates/` (jinja2, from the `plots` extra), HTML-escaping every value."""
    try:
        import jinja2
    except ImportError:
        raise UsageError("the HTML report needs jinja2: pip install 'edsb[plots]'") from None
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("edsb.report", "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    return environment.get_template(name)


class _Sections:
    """A table of distinct text sections; a message becomes the list of its sections' indices."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return [self.index.setdefault(part, len(self.index)) for part in text.split("\n\n")]

    def table(self) -> list[str]:
        return list(self.index)


def _rgb(colour: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in colour)


def _png_data_uri(figure: Any, dpi: int, colours: int = 64) -> str:
    """The figure as an inline PNG with a small palette (a quarter of the bytes; the drawings use few colours).
    Pillow comes with matplotlib."""
    import matplotlib.pyplot as plt
    from PIL import Image

    rendered = io.BytesIO()
    figure.savefig(rendered, format="png", dpi=dpi)
    plt.close(figure)
    rendered.seek(0)
    small = io.BytesIO()
    Image.open(rendered).convert("RGB").quantize(colours).save(small, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(small.getvalue()).decode("ascii")


def _area_image(area: tuple[Any, tuple[float, float, float, float]]) -> str:
    """A PI case's accepted area as an SVG image: the judge's mask as a tiny two-colour PNG, top row = highest y."""
    from PIL import Image

    mask, (x0, x1, y0, y1) = area
    rgba = np.zeros((*mask.shape, 4), dtype=np.uint8)
    rgba[mask] = (*(round(c * 255) for c in EXPECTED_COLOUR), round(EXPECTED_AREA_ALPHA * 255))
    buffer = io.BytesIO()
    Image.fromarray(rgba[::-1]).save(buffer, format="PNG", optimize=True)
    uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    return (
        f'<image href="{uri}" x="{x0:.3f}" y="{-y1:.3f}" width="{x1 - x0:.3f}" height="{y1 - y0:.3f}" '
        'preserveAspectRatio="none" style="image-rendering: pixelated"/>'
    )


class _Layers:
    """The SVG layers of one scene's pictures, in user units of the scene (metres, y flipped), sized for a picture
    `PICTURE_PX` wide. Every style is an attribute of the layer's group or of the shape itself: the case layers live
    in `<defs>` and are drawn through `<use>`, where the page's CSS does not reach them. Labels are placed so that
    none overlaps another label or a marker of the same picture, whichever layer it is in."""

    def __init__(self, scene: Scene) -> None:
        x0, x1, y0, y1 = scene_extent(scene)
        self.scene = scene
        self.bounds = (x0, y0, x1, y1)
        self.unit = (x1 - x0) / PICTURE_PX  # metres per pixel of the picture
        labels = [(box.name, float(box.center[0]), float(box.center[1])) for box in scene.objects]
        self.name_boxes = place_labels(labels, NAME_PX * self.unit, self.bounds, centred=True)
        self.names = self._group(
            NAME_PX,
            "".join(
                self._leader(box, x, y, NAME_PX * self.unit, 0.0, "#222")
                + self._text(name, box, NAME_PX * self.unit, "#222")
                for (name, x, y), box in zip(labels, self.name_boxes, strict=True)
            ),
        )

    def _group(self, font_px: float, shapes: str) -> str:
        """A layer: its shapes in a group carrying what they share (font, a one-pixel white halo and outline)."""
        return (
            f'<g font-family="sans-serif" font-size="{font_px * self.unit:.3f}" stroke="#fff" '
            f'stroke-width="{self.unit:.3f}" paint-order="stroke">{shapes}</g>'
        )

    @staticmethod
    def _text(label: str, box: Box, size: float, colour: str) -> str:
        """A label filling its placed box: drawn at exactly the width `place_labels` assumed (the group's font
        size is `size`), baseline a quarter of the font size above the box's bottom."""
        return (
            f'<text x="{box[0]:.2f}" y="{-box[1] - 0.25 * size:.2f}" textLength="{box[2] - box[0]:.2f}" '
            f'lengthAdjust="spacingAndGlyphs" fill="{colour}">{_escape(label)}</text>'
        )

    def _leader(self, box: Box, x: float, y: float, size: float, clearance: float, colour: str) -> str:
        """A thin line from the anchor (x, y) to its label, where `place_labels` had to move the label away."""
        if not needs_leader(box, x, y, size, clearance):
            return ""
        end = leader_end(box, x, y)
        return (
            f'<line x1="{x:.2f}" y1="{-y:.2f}" x2="{end[0]:.2f}" y2="{-end[1]:.2f}" stroke="{colour}" '
            f'stroke-width="{0.75 * self.unit:.3f}" stroke-opacity="0.8"/>'
        )

    def shapes(self, marks: Marks, taken: list[Box]) -> tuple[str, list[Box]]:
        """`marks` as SVG (the area first, so the rest stays on top) and every box it covers, added to `taken`."""
        unit = self.unit
        shapes = [_area_image(marks.area)] if marks.area is not None else []
        for name, role in marks.objects.items():
            points = " ".join(f"{x:.2f},{-y:.2f}" for x, y in self.scene.by_name[name].footprint.astype(float))
            colour = _rgb(EXPECTED_COLOUR if role == "expected" else PLAN_COLOUR)
            shapes.append(
                f'<polygon points="{points}" class="{role}" fill="none" stroke="{colour}" '
                f'stroke-width="{2.5 * unit:.3f}"><title>{_escape(name)}</title></polygon>'
            )
        placed = list(taken)
        labels = []
        for label, x, y, kind in marks.points:
            plan = kind == "plan"
            radius = (PLAN_PX if plan else CHARACTER_PX) * unit
            colour = _rgb(PLAN_COLOUR if plan else CHARACTER_COLOUR)
            if plan:  # a five-pointed star, as `edsb show` draws a plan
                corners = [
                    (x + r * np.sin(a), -y - r * np.cos(a))
                    for i, a in enumerate(np.linspace(0, 2 * np.pi, 10, endpoint=False))
                    for r in [radius if i % 2 == 0 else radius * 0.45]
                ]
                points = " ".join(f"{cx:.2f},{cy:.2f}" for cx, cy in corners)
                marker = f'<polygon points="{points}" class="star" fill="{colour}"'
            else:
                marker = f'<circle cx="{x:.2f}" cy="{-y:.2f}" r="{radius:.3f}" fill="{colour}"'
            shapes.append(f"{marker}><title>{_escape(label)}</title>" + ("</polygon>" if plan else "</circle>"))
            placed.append((x - radius, y - radius, x + radius, y + radius))
            labels.append((label, x, y, radius, colour))
        for label, x, y, radius, colour in labels:
            (box,) = place_labels([(label, x, y)], LABEL_PX * unit, self.bounds, clearance=radius, taken=placed)
            placed.append(box)
            shapes.append(self._leader(box, x, y, LABEL_PX * unit, radius, colour))
            shapes.append(self._text(label, box, LABEL_PX * unit, colour))
        return self._group(LABEL_PX, "".join(shapes)), placed


def _view_box(scene: Scene) -> str:
    x0, x1, y0, y1 = scene_extent(scene)
    return f"{x0:.2f} {-y1:.2f} {x1 - x0:.2f} {y1 - y0:.2f}"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _exchanges(records: list[TranscriptRecord], sections: _Sections) -> list[dict[str, Any]]:
    exchanges = []
    for record in records:
        reply = record.response.text if record.response is not None else None
        reasoning = record.response.reasoning if record.response is not None else ""
        exchanges.append(
            {
                "module": record.module,
                "messages": [[m.role, sections.encode(m.content)] for m in record.request.messages],
                "reply": sections.encode(reply) if reply is not None else None,
                "reasoning": sections.encode(reasoning) if reasoning else None,  # shown folded, above the reply
                "error": record.error.message if record.error is not None else None,
            }
        )
    return exchanges


SAMPLER_MISS_NOTE = " (a sampler miss: the optimal sampler would have passed these relationships)"


class _Pictures:
    """The layered pictures of a page, each layer drawn once: a scene's background (an inline PNG, a CSS class
    `bg-<scene>`) and its object names (`names-<scene>`), a case level's characters and expected region
    (`case-<id>-<level>`, with the label and marker boxes it covers); each run adds only its plan's shapes."""

    def __init__(self, benchmark: Benchmark) -> None:
        self.benchmark = benchmark
        self.backgrounds: dict[str, str] = {}
        self.case_layers: dict[str, str] = {}
        self._scenes: dict[str, _Layers] = {}
        self._case_boxes: dict[str, list[Box]] = {}

    def _scene(self, scene: Scene) -> _Layers:
        if scene.name not in self._scenes:
            figure = floor_plan_figure(scene, [], width_in=PICTURE_WIDTH_IN, chrome=False, names=False)
            self.backgrounds[f"bg-{scene.name}"] = _png_data_uri(figure, PICTURE_DPI)
            self._scenes[scene.name] = layers = _Layers(scene)
            self.case_layers[f"names-{scene.name}"] = layers.names
        return self._scenes[scene.name]

    def picture(self, case: TestCase, record: RunResult) -> dict[str, str]:
        """A run's picture: the layers it stacks, and its plan's shapes placed clear of their labels."""
        level = min(record.distraction, case.max_distraction)
        scene = load_scene(self.benchmark, case.scene_name)
        layers = self._scene(scene)
        layer = f"case-{case.id}-{level}"
        if layer not in self.case_layers:
            marks = case_marks(case, level, scene)
            self.case_layers[layer], self._case_boxes[layer] = layers.shapes(marks, layers.name_boxes)
        x0, x1, y0, y1 = scene_extent(scene)
        return {
            "background": f"bg-{scene.name}",
            "ratio": f"{x1 - x0:.3f} / {y1 - y0:.3f}",
            "view_box": _view_box(scene),
            "names": f"names-{scene.name}",
            "layer": layer,
            "plan": layers.shapes(plan_marks(record.plan, scene), self._case_boxes[layer])[0],
        }


def _run_entry(
    record: RunResult,
    case: TestCase | None,
    transcript: list[TranscriptRecord],
    sections: _Sections,
    error_colours: Mapping[str, str],
    pictures: _Pictures,
) -> dict[str, Any]:
    """One run's drill-down: its verdict and colour, instruction, exchanges, executed code, event, plan, picture."""
    status = str(record.status)
    colour = error_colours.get(str(record.error_kind)) if record.errored else STATUS_COLOURS.get(status)
    entry: dict[str, Any] = {
        "anchor": run_anchor(record.run_key),
        "key": record.key,
        "variant": record.variant,
        "status": status,
        "kind": str(record.error_kind) if record.error_kind else "",
        "colour": colour or "#555",
        "reason": (record.error or record.reason or "") + (SAMPLER_MISS_NOTE if record.sampler_miss else ""),
        "instruction": case.user_instruction if case else "",
        "plan": json.dumps(record.plan, indent=1) if record.plan is not None else None,
        "event": json.dumps(record.event) if record.event else None,
        "exchanges": _exchanges(transcript, sections),
        "code": executed_code(transcript, record.variant),
    }
    if case is not None:
        entry["picture"] = pictures.picture(case, record)
    return entry


Grid = dict[str, dict[int, dict[int, list[dict[str, Any]]]]]


def _grid(records: list[RunResult], runs: list[dict[str, Any]]) -> tuple[Grid, int]:
    """Variant → case → distraction level → its runs' entries (cases ascending), and the most repeats of a cell."""
    grid: Grid = defaultdict(lambda: defaultdict(dict))
    for record, entry in zip(records, runs, strict=True):
        grid[record.variant][record.case].setdefault(record.distraction, []).append(entry)
    repeats = max((len(c) for cases in grid.values() for lv in cases.values() for c in lv.values()), default=0)
    return {variant: dict(sorted(cases.items())) for variant, cases in grid.items()}, repeats


def _summary_tables(summary: RunSummary) -> dict[str, Any]:
    """The template's tables of the summary: the paper's blocks with intervals (levels any variant ran), the
    statistics per variant, power and sampler misses."""
    return {
        "columns": TAG_COLUMNS,
        "blocks": [
            (level, paper_rows(summary, level, intervals=True))
            for level in LEVEL_ROWS
            if any(row[1:] != ["-"] * len(TAG_COLUMNS) for row in paper_rows(summary, level))
        ],
        "stats": summary.variants,
        "power": (POWER_TITLE, power_header(), power_rows(summary)),
        "sampler_title": SAMPLER_MISS_TITLE,
        "sampler_header": SAMPLER_MISS_HEADER,
        "sampler_rows": sampler_miss_rows(summary),
    }


def _script_json(data: Any) -> str:
    """JSON safe inside a `<script>` element."""
    return json.dumps(data).replace("</", "<\\/")


def build_page(run_dir: Path, benchmark: Benchmark) -> str:
    """The whole HTML document of one run directory (a perturbed run is drawn and titled with its renaming)."""
    # 1. The run, on the benchmark as it was run (a perturbed run with its renaming), runs in report order.
    run = RunDirectory.open(run_dir)
    if run.config.perturb != benchmark.perturb:
        benchmark = Benchmark(benchmark.root, run.config.perturb)
    records = sorted(run.results, key=lambda r: (variant_rank(r.variant), r.case, r.distraction, r.repeat))
    # 2. A drill-down per run (message texts stored once, pictures layered), and the grid that links to them.
    sections, pictures, transcripts = _Sections(), _Pictures(benchmark), transcripts_by_run(run_dir)
    error_colours = error_kind_colours(str(r.error_kind) for r in records if r.errored)
    runs = [
        _run_entry(r, benchmark.cases.get(r.case), transcripts.get(r.run_key.file_stem, []), sections,
                   error_colours, pictures)
        for r in records
    ]  # fmt: skip
    grid, repeats = _grid(records, runs)
    # 3. The summary's tables and figure.
    summary = build_summary(run.results)
    label = perturbation_label(run.config.perturb)
    chart = _chart(summary, f"{run.config.model} — {Path(run_dir).name}" + (f" — {label}" if label else ""))
    # 4. The page.
    return load_template("report.html.j2").render(
        title=f"edsb report — {Path(run_dir).resolve().name}" + (f" — {label}" if label else ""),
        model=run.config.model,
        **_summary_tables(summary),
        chart=chart,
        grid=grid,
        levels=sorted({r.distraction for r in records}),
        repeats=repeats,
        runs=runs,
        legend={**STATUS_COLOURS, **{f"error: {k}": v for k, v in error_colours.items()}},
        backgrounds=pictures.backgrounds,
        case_layers=pictures.case_layers,
        sections=_script_json(sections.table()),
        exchanges=_script_json({r["anchor"]: r["exchanges"] for r in runs if r["exchanges"]}),
        error_colours=error_colours,
    )


def _chart(summary: RunSummary, title: str) -> str | None:
    """The by-tag / by-level figure of `edsb report --plot` as a data URI, or None when nothing was judged."""
    import tempfile

    from edsb.report.plots import plot_summary

    if not any(data.cells for data in summary.variants.values()):
        return None
    with tempfile.TemporaryDirectory() as directory:
        path = plot_summary(summary, Path(directory) / "chart.png", title=title, dpi=80)
        return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def write_html_report(run_dir: Path, output: Path, benchmark: Benchmark) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(build_page(run_dir, benchmark), encoding="utf-8")
    return output
