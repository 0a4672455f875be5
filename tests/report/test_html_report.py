"""The HTML report opened in headless Chromium (Debian's `chromium`, driven by Playwright): what a user sees.

A real run (loopback server, scripted model) of case 13 at levels 0 and 2 and case 60, plus a failed and an errored
run written by hand. The page must fetch nothing; every label of a drill-down picture must lie inside the picture's
own panel, and no two labels may overlap; expected anchors are outlined, not filled black; the filters and the jump
from an error kind to its runs work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from edsb.data.benchmark import Benchmark
from tests.support.browser import chromium_page
from tests.support.edsb_cli import isolate_environment, run_edsb
from tests.support.openai_server import OpenAIServer
from tests.support.scripted_stories import StoryModel

LEVEL_2_RUN = "run-ours__tc13-d2-r0"  # case 13 at level 2: four history characters around the kitchen
TOLERANCE_PX = 0.5

# Every rendered label and picture of one run's drill-down, in page pixels. A picture's case layers live in
# <defs> and are drawn through <use>, whose clones a script cannot reach: each label there is measured as what the
# <use> draws while every other shape of its layer is hidden.
MEASURE = """
(anchor) => {
  const box = (r) => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom});
  const run = document.getElementById(anchor);
  const panel = run.querySelector(".picture");
  const svg = panel.querySelector("svg");
  const pictures = [], labels = [], fills = [];
  svg.querySelectorAll(":scope > use").forEach((use) => {
    const id = use.getAttribute("href").slice(1);
    pictures.push({what: id, box: box(use.getBoundingClientRect())});
    const layer = document.getElementById(id);
    const shapes = Array.from(layer.querySelectorAll("*"));
    layer.querySelectorAll("polygon.expected").forEach((shape) => fills.push(getComputedStyle(shape).fill));
    layer.querySelectorAll("text").forEach((text) => {
      shapes.forEach((other) => {
        const keep = other === text || other.contains(text) || text.contains(other);
        other.style.display = keep ? "" : "none";
      });
      labels.push({what: text.textContent, box: box(use.getBoundingClientRect())});
    });
    shapes.forEach((other) => { other.style.display = ""; });
  });
  svg.querySelectorAll("text").forEach((text) => {
    labels.push({what: text.textContent, box: box(text.getBoundingClientRect())});
  });
  const stars = Array.from(svg.querySelectorAll("polygon.star")).map((star) => box(star.getBoundingClientRect()));
  return {stars, panel: box(panel.getBoundingClientRect()), svg: box(svg.getBoundingClientRect()),
          overflow: [getComputedStyle(panel).overflow, getComputedStyle(svg).overflow], pictures, labels, fills, stars};
}
"""


def _inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["left"] >= outer["left"] - TOLERANCE_PX
        and inner["top"] >= outer["top"] - TOLERANCE_PX
        and inner["right"] <= outer["right"] + TOLERANCE_PX
        and inner["bottom"] <= outer["bottom"] + TOLERANCE_PX
    )


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        min(a["right"], b["right"]) - max(a["left"], b["left"]) > TOLERANCE_PX
        and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > TOLERANCE_PX
    )


@pytest.fixture(scope="module")
def scripted_run_dir(benchmark: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    out = root / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, root / "cache")
        with OpenAIServer(StoryModel(benchmark.cases)) as server:
            for cases, levels in (("13", "0,2"), ("60", "0")):
                code = run_edsb(
                    "run", "--model", "openai:scripted", "--base-url", server.base_url, "--cases", cases,
                    "--distraction", levels, "--repeats", "1", "--max-retries", "0", "--quiet", "--out", str(out),
                )  # fmt: skip
                assert code == 0
    base = {"variant": "ours", "case": 13, "distraction": 0, "tags": ["RC"], "passed": False}
    failed = {
        **base,
        "key": "ours/tc13-d0-r1",
        "repeat": 1,
        "status": "failed",
        "plan": {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_3"]}},
        "reason": "David: relationships ['sit on chair_3'] do not satisfy the expected seats",
    }
    errored = {
        **base,
        "key": "ours/tc13-d0-r2",
        "repeat": 2,
        "status": "error",
        "error_kind": "code_runtime",
        "error": "KeyError: 'table_99'",
    }
    with (out / "results.jsonl").open("a") as handle:
        handle.write(json.dumps(failed) + "\n" + json.dumps(errored) + "\n")
    return out


@pytest.fixture(scope="module")
def page(scripted_run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    page = tmp_path_factory.mktemp("page") / "report.html"
    assert run_edsb("report", str(scripted_run_dir), "--format", "html", "-o", str(page)) == 0
    return page


def test_report_in_chromium_has_tables_and_drill_down_and_fetches_nothing(page: Path) -> None:
    html = page.read_text()
    assert "http://" not in html and "https://" not in html
    with chromium_page() as browser:
        browser.open(page, "#run-ours__tc13-d0-r0")
        dom = browser.evaluate("document.documentElement.outerHTML")
        assert browser.evaluate("document.getElementById('run-ours__tc13-d0-r0').open"), "the run named is not open"
        drill_down = browser.evaluate("document.getElementById('run-ours__tc13-d0-r0').textContent")
        fetched = browser.fetched
    assert 'class="summary"' in dom and "Distraction level 0" in dom
    assert 'id="run-ours__tc13-d0-r1"' in dom and "do not satisfy the expected seats" in dom
    # the page's script filled in the prompts and replies from the transcripts
    assert "Request 1 (narrator)" in drill_down and "Request 2 (event_parser)" in drill_down
    assert "[User Instruction]" in drill_down and "Executed code" in drill_down
    assert fetched == []


def test_the_browser_sees_a_page_that_fetches(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://example.invalid/pixel.png"></body></html>')
    with chromium_page() as browser:
        browser.open(control)
        fetched = browser.fetched
    assert fetched == ["http://example.invalid/pixel.png"]


def test_every_label_of_a_level_2_picture_stays_in_its_panel_and_none_overlaps(page: Path) -> None:
    with chromium_page() as browser:
        browser.open(page, "#" + LEVEL_2_RUN)
        seen: dict[str, Any] = browser.evaluate(MEASURE, LEVEL_2_RUN)
    panel = seen["panel"]
    labels = seen["labels"]
    for label in labels:
        assert _inside(label["box"], panel), (label, panel)
        assert label["box"]["bottom"] - label["box"]["top"] < 20, label  # a label, not a glyph metres tall
    for picture in seen["pictures"]:
        assert _inside(picture["box"], panel), picture
    assert _inside(seen["svg"], panel)
    assert len(seen["fills"]) == 4  # case 13 expects one of four seats
    assert all(fill not in ("rgb(0, 0, 0)", "#000000", "black") for fill in seen["fills"]), seen["fills"]
    assert seen["overflow"] == ["hidden", "hidden"], "a picture must be clipped to its box"
    (star,) = seen["stars"]  # David's plan, as a star big enough to find at a glance
    assert star["right"] - star["left"] >= 16 and star["bottom"] - star["top"] >= 16, star
    names = {label["what"] for label in labels}
    assert {"Melissa", "Michael", "Sarah", "Cody", "David", "table_4", "coffee_maker_1"} <= names
    for index, label in enumerate(labels):
        for other in labels[index + 1 :]:
            assert not _overlap(label["box"], other["box"]), (label, other)


def test_failed_runs_only_and_the_jump_from_an_error_kind_to_its_runs(page: Path) -> None:
    visible = "Array.from(document.querySelectorAll(sel)).filter((e) => e.checkVisibility()).map((e) => e.id)"
    script = f"(sel) => {visible}"
    with chromium_page() as browser:
        browser.open(page)
        every_run = browser.evaluate(script, "details.run")
        cells = browser.evaluate("document.querySelectorAll('.grid a').length")
        swatches = browser.evaluate(
            "Array.from(document.querySelectorAll('.legend i')).map((i) => getComputedStyle(i).backgroundColor)"
        )
        browser.page.check("#failed-only")
        failed_only = browser.evaluate(script, "details.run")
        failed_cells = browser.evaluate(
            "Array.from(document.querySelectorAll('.grid a')).filter(e => e.checkVisibility()).length"
        )
        browser.page.uncheck("#failed-only")
        browser.page.click("table.stats a.kind")
        browser.page.wait_for_function("() => !document.getElementById('filter-note').hidden")
        of_kind = browser.evaluate(script, "details.run")
        note = browser.evaluate("document.getElementById('filter-note').textContent")
        browser.page.click("#filter-note a")
        browser.page.wait_for_function("() => document.getElementById('filter-note').hidden")  # hashchange is async
        again = browser.evaluate(script, "details.run")
    assert len(swatches) == 4 and len(set(swatches)) == 4  # passed, failed, incomplete, error: code_runtime
    assert len(every_run) == cells == 5
    assert failed_only == ["run-ours__tc13-d0-r1", "run-ours__tc13-d0-r2"] and failed_cells == 2
    assert of_kind == ["run-ours__tc13-d0-r2"] and note.startswith("1 ours runs with error code_runtime")
    assert again == every_run
