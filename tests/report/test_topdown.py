"""Top-down pictures: every scene renders, and a PI case's shaded area is exactly where the judge accepts a plan."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from edsb.data.benchmark import Benchmark
from edsb.geometry.scene import load_scene
from edsb.report.topdown import EXPECTED_COLOUR, case_figure, plan_marks
from tests.support.edsb_cli import run_edsb

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def image_colours(path: Path) -> int:
    """Distinct colours of a written PNG: a blank or single-colour canvas has one or two."""
    pixels = plt.imread(path)
    return len(np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0))


def test_a_scene_renders_with_its_regions(tmp_path: Path) -> None:
    """`edsb scenes` writes the picture; every scene's regions picture is drawn and measured in
    test_topdown_labels, so one scene shows the command's part."""
    scene = "House"
    assert run_edsb("scenes", "--scene", scene, "-o", tmp_path) == 0
    picture = tmp_path / f"{scene}.png"
    assert picture.stat().st_size > 20_000
    assert image_colours(picture) > 50  # footprints in several region colours, names, axes


def test_show_writes_a_case_picture_with_a_run_plan(tmp_path: Path, benchmark: Benchmark) -> None:
    run = tmp_path / "run"
    run.mkdir()
    plan = {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_3"]}}
    line = {"key": "ours/tc13-d1-r0", "variant": "ours", "case": 13, "distraction": 1, "repeat": 0, "plan": plan}
    (run / "results.jsonl").write_text(json.dumps({**line, "status": "failed"}) + "\n")
    assert run_edsb("show", "13", "--distraction", "1", "--run", run, "-o", tmp_path / "c13.svg") == 0
    svg = (tmp_path / "c13.svg").read_text()
    assert "FAILED" in svg and "chair_3" in svg and "do not satisfy" in svg


def test_show_refuses_an_unknown_run_and_suffix(tmp_path: Path, capsys) -> None:
    assert run_edsb("show", "13", "-o", tmp_path / "c13.gif") != 0
    assert "must be .png, .svg or .pdf" in capsys.readouterr().err
    assert run_edsb("show", "13", "--run", tmp_path, "-o", tmp_path / "c13.png") != 0
    assert "not a run directory" in capsys.readouterr().err


@pytest.mark.parametrize("case_id", [61, 63, 66])
def test_the_shaded_area_is_where_the_judge_accepts(benchmark: Benchmark, case_id: int) -> None:
    case = benchmark.case(case_id)
    scene = load_scene(benchmark, case.scene_name)
    from edsb.scoring.judge import Judge

    judge = Judge(case, 0, scene)
    name = case.expected_plans[0].character
    # a plan that passes, taken from the judge's own verdict on a lattice
    xs, ys = np.meshgrid(np.arange(-1, 12, 0.1), np.arange(-1, 12, 0.1))
    lattice = np.stack([xs, ys], axis=-1).reshape(-1, 2)
    accepted = lattice[judge.position_pass_mask(lattice)]
    plan = {name: {"sampled_position": accepted[len(accepted) // 2].tolist()}}
    figure = case_figure(case, 0, scene, plan, has_plan=True)
    assert "PASSED" in figure.axes[0].get_title()
    assert plan_marks(plan, scene).points[0][0] == name
    figure.canvas.draw()
    pixels = np.asarray(figure.canvas.buffer_rgba())[..., :3].astype(int)
    ax = figure.axes[0]
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    rng = np.random.default_rng(case_id)
    points = np.column_stack([rng.uniform(x0 + 0.3, x1 - 0.3, 3000), rng.uniform(y0 + 0.3, y1 - 0.3, 3000)])
    verdicts = np.array([judge.judge({name: {"sampled_position": p.tolist()}}).passed for p in points])
    display = ax.transData.transform(points)
    columns = np.round(display[:, 0]).astype(int)
    rows = np.round(pixels.shape[0] - display[:, 1]).astype(int)
    sampled = pixels[rows, columns]
    red, green, blue = sampled[:, 0], sampled[:, 1], sampled[:, 2]
    tinted = (green - red > 25) & (green - blue > 15)
    assert EXPECTED_COLOUR[1] > EXPECTED_COLOUR[0] and EXPECTED_COLOUR[1] > EXPECTED_COLOUR[2]
    assert verdicts.sum() >= 20 and (~verdicts).sum() >= 20
    # labels, arrows and the plan marker may cover a few sampled pixels; everything else must agree
    assert np.mean(tinted[verdicts]) > 0.9
    assert np.mean(tinted[~verdicts]) < 0.02
    plt.close(figure)
