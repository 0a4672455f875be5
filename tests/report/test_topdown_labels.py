"""No label of a floor plan covers another or leaves the picture: every case's `edsb show --run` picture (the case
at each of its levels with the plan of a run of the negative control, which names wrong anchors and points) in all
three scenes, and each scene's regions picture, measured as matplotlib's renderer draws the labels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.models import SCENES
from edsb.geometry.scene import load_scene
from edsb.report.topdown import regions_figure, result_figure
from edsb.results.rundir import load_results
from tests.support.edsb_cli import isolate_environment, run_edsb

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TOLERANCE_PX = 0.5


@pytest.fixture(scope="module")
def oracle_wrong_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("labels")
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, root / "cache")
        out = root / "wrong"
        code = run_edsb(
            "run", "--model", "oracle-wrong", "--cases", "all", "--repeats", "1", "--out", str(out), "--quiet"
        )  # fmt: skip
        assert code == 0
        yield out


def label_problems(figure: plt.Figure) -> list[str]:
    """Pairs of overlapping labels and labels outside the axes, in the figure's own pixels."""
    ax = figure.axes[0]
    renderer = figure.canvas.get_renderer()
    labels = [(text.get_text(), text.get_window_extent(renderer)) for text in ax.texts if text.get_text()]
    frame = ax.bbox
    problems = [
        f"{name} outside the picture"
        for name, box in labels
        if box.x0 < frame.x0 - TOLERANCE_PX
        or box.y0 < frame.y0 - TOLERANCE_PX
        or box.x1 > frame.x1 + TOLERANCE_PX
        or box.y1 > frame.y1 + TOLERANCE_PX
    ]
    for index, (name, box) in enumerate(labels):
        for other, other_box in labels[index + 1 :]:
            width = min(box.x1, other_box.x1) - max(box.x0, other_box.x0)
            height = min(box.y1, other_box.y1) - max(box.y0, other_box.y0)
            if width > TOLERANCE_PX and height > TOLERANCE_PX:
                problems.append(f"{name} over {other}")
    plt.close(figure)
    return problems


@pytest.mark.parametrize("scene_name", SCENES)
def test_no_label_of_any_case_picture_covers_another(
    benchmark: Benchmark, oracle_wrong_run_dir: Path, scene_name: str
) -> None:
    scene = load_scene(benchmark, scene_name)
    results = [r for r in load_results(oracle_wrong_run_dir) if benchmark.case(r.case).scene_name == scene_name]
    cases = {r.case for r in results}
    assert cases and cases == {i for i, case in benchmark.cases.items() if case.scene_name == scene_name}
    problems = {}
    for result in results:
        case = benchmark.case(result.case)
        figure = result_figure(case, min(result.distraction, case.max_distraction), scene, result)
        assert sum(bool(text.get_text()) for text in figure.axes[0].texts) > len(scene.objects)  # names and marks
        found = label_problems(figure)
        if found:
            problems[result.key] = found
    assert problems == {}


@pytest.mark.parametrize("scene_name", SCENES)
def test_no_name_of_a_regions_picture_covers_another(benchmark: Benchmark, scene_name: str) -> None:
    assert label_problems(regions_figure(load_scene(benchmark, scene_name))) == []
