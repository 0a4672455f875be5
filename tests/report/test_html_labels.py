"""Every drill-down picture of the HTML report, measured in headless Chromium: a run of the negative control over
every case and level (its plans name wrong anchors and points, in all three scenes), each run opened in turn, every
rendered label inside its picture and none over another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from edsb.data.models import SCENES
from edsb.geometry.scene import load_scene
from tests.report.test_html_report import MEASURE, _inside, _overlap
from tests.support.browser import chromium_page, require_chromium
from tests.support.edsb_cli import isolate_environment, run_edsb

# MEASURE for each run in turn, its drill-down opened for the measurement and closed again.
MEASURE_ALL = f"""
(anchors) => {{
  const measure = {MEASURE.strip()};
  return anchors.map((anchor) => {{
    const run = document.getElementById(anchor);
    run.open = true;
    const seen = measure(anchor);
    run.open = false;
    return [anchor, seen];
  }});
}}
"""


@pytest.fixture(scope="module")
def oracle_wrong_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_chromium()  # before the run: without a browser there is nothing to measure
    root = tmp_path_factory.mktemp("labels-html")
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, root / "cache")
        out = root / "wrong"
        code = run_edsb(
            "run", "--model", "oracle-wrong", "--cases", "all", "--repeats", "1", "--out", str(out), "--quiet"
        )  # fmt: skip
        assert code == 0
        oracle_wrong_page = root / "report.html"
        assert run_edsb("report", str(out), "--format", "html", "-o", str(oracle_wrong_page)) == 0
    return oracle_wrong_page


def test_no_label_of_any_drill_down_picture_leaves_it_or_covers_another(
    oracle_wrong_page: Path, benchmark: Benchmark
) -> None:
    with chromium_page() as browser:
        browser.open(oracle_wrong_page)
        anchors = browser.evaluate("Array.from(document.querySelectorAll('details.run')).map((run) => run.id)")
        measured: list[tuple[str, dict[str, Any]]] = browser.evaluate(MEASURE_ALL, anchors)
    assert len(measured) == sum(case.max_distraction + 1 for case in benchmark.cases.values())
    objects = {name: len(load_scene(benchmark, name).objects) for name in SCENES}
    scenes = set()
    problems: dict[str, list[str]] = {}
    for anchor, seen in measured:
        labels = seen["labels"]
        case = benchmark.case(int(anchor.split("__tc")[1][:2]))
        scenes.add(case.scene_name)
        assert len(labels) > objects[case.scene_name], anchor  # the names, and characters or a plan
        found = [f"{label['what']} outside" for label in labels if not _inside(label["box"], seen["panel"])]
        found += [
            f"{label['what']} over {other['what']}"
            for index, label in enumerate(labels)
            for other in labels[index + 1 :]
            if _overlap(label["box"], other["box"])
        ]
        if found:
            problems[anchor] = found
    assert scenes == set(SCENES)
    assert problems == {}
