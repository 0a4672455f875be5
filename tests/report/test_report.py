"""`edsb report` / `edsb compare` on run directories written by hand."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from tests.support.edsb_cli import edsb_in_process
from tests.support.run_dir import result_record, write_run_dir


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    records = [
        result_record("ours", 0, ["OA"], 0, 0, "passed"),
        result_record("ours", 0, ["OA"], 0, 1, "passed"),
        result_record(
            "ours", 30, ["OA", "RC"], 1, 0, "failed", reason="Ann: relationships [] do not satisfy 'sit on chair_1'"
        ),
        result_record(
            "ours", 30, ["OA", "RC"], 1, 1, "error", error_kind="code_runtime", error="code_runtime: KeyError"
        ),
        result_record("ours", 20, ["SS"], 2, 0, "incomplete", error_kind="transport_timeout"),
        result_record("scene-graph", 0, ["OA"], 0, 0, "failed"),
    ]
    return write_run_dir(tmp_path / "run-a", records)


def test_json_report_counts_and_excludes_incomplete(run_dir: Path, capsys) -> None:
    code, out, _ = edsb_in_process(["report", str(run_dir), "--format", "json"], capsys)
    summary = json.loads(out)["variants"]
    ours = summary["ours"]
    assert code == 0
    assert (ours["runs"], ours["incomplete"]) == (4, 1)
    assert ours["success_rate"] == 0.5 and ours["execution_rate"] == 0.75
    assert ours["by_tag"]["OA"]["success_rate"] == 0.5
    assert ours["by_tag"]["RC"]["success_rate"] == 0.0 and ours["by_tag"]["RC"]["execution_rate"] == 0.5
    assert "SS" not in ours["by_tag"]  # its only run is incomplete
    assert ours["error_kinds"] == {"code_runtime": 1}
    assert ours["pass_hat_k"]["2"] == 0.5  # case 0 level 0: 2/2, case 30 level 1: 0/2
    assert ours["tokens"]["by_module"]["narrator"] == {"prompt": 3000, "completion": 300}
    assert summary["scene-graph"]["success_rate"] == 0.0


def test_csv_report_is_tidy(run_dir: Path, capsys) -> None:
    """One header, then one row per cell: no section rows, every row as wide as the header."""
    _, out, _ = edsb_in_process(["report", str(run_dir), "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert out.count("variant,tag,distraction") == 1
    assert all(None not in row and None not in row.values() for row in rows)
    cells = {(r["variant"], r["tag"], r["distraction"]): r for r in rows}
    assert len(cells) == len(rows)
    total = cells[("ours", "Total", "Total")]
    assert (total["runs"], total["passes"], total["errors"]) == ("4", "2", "1")
    assert (total["success_rate"], total["execution_rate"]) == ("0.5", "0.75")
    assert float(total["success_low"]) < 0.5 < float(total["success_high"])
    assert cells[("ours", "RC", "1")]["success_rate"] == "0.0"
    assert ("ours", "SS", "2") not in cells  # its only run is incomplete
    assert cells[("scene-graph", "OA", "0")]["runs"] == "1"


def test_levels_come_in_the_tables_order_whatever_order_the_runs_finished_in(tmp_path: Path, capsys) -> None:
    """results.jsonl holds runs in the order they finished (level 1 first here); the CSV and the JSON list the
    levels as the text report does: Total, then 0, 1, 2."""
    records = [result_record("ours", 13, ["RC"], level, 0, "passed") for level in (1, 0, 2)]
    run_dir = write_run_dir(tmp_path / "run", records)
    _, out, _ = edsb_in_process(["report", str(run_dir), "--format", "csv"], capsys)
    levels = [(row["tag"], row["distraction"]) for row in csv.DictReader(io.StringIO(out))]
    assert levels == [(tag, level) for tag in ("Total", "RC") for level in ("Total", "0", "1", "2")]
    _, out, _ = edsb_in_process(["report", str(run_dir), "--format", "json"], capsys)
    cells = json.loads(out)["variants"]["ours"]["cells"]
    assert [list(by_level) for by_level in cells.values()] == [["Total", "0", "1", "2"]] * 2


def test_markdown_report_has_cost_errors_and_cases(run_dir: Path, capsys) -> None:
    _, out, _ = edsb_in_process(["report", str(run_dir), "--format", "markdown", "--intervals"], capsys)
    assert "| ours | 0.5 (0.75) [0.15, 0.85]" in out
    assert "| ours | code_runtime | 1 |" in out
    assert "### Why plans failed (most frequent reasons)" in out
    assert "| ours | Ann: relationships [] do not satisfy 'sit on chair_1' | 1 |" in out
    assert "incomplete: transport_timeout (not counted) | 1 |" in out
    # Built-in price for gpt-4o-2024-08-06: 5,000 prompt and 500 completion tokens over all ours runs.
    assert "$0.02" in out
    _, out, _ = edsb_in_process(
        ["report", str(run_dir), "--format", "markdown", "--price-in", "1000", "--price-out", "0"], capsys
    )
    assert "$5.00" in out


@pytest.fixture
def repeated_run(tmp_path: Path) -> Path:
    """Eight cases at level 0, two repeats each: [pass, pass], [pass, fail], [fail, fail], [pass, fail], twice."""
    patterns = [("passed", "passed"), ("passed", "failed"), ("failed", "failed"), ("passed", "failed")] * 2
    records = [
        result_record("ours", case, ["OA"], 0, repeat, status)
        for case, pattern in enumerate(patterns)
        for repeat, status in enumerate(pattern)
    ]
    return write_run_dir(tmp_path / "repeated", records)


def test_report_states_the_minimum_detectable_difference(repeated_run: Path, tmp_path: Path, capsys) -> None:
    # By hand: mean 1/2; residual sums per case 1, 0, −1, 0 (twice), so CR1 = 8/7 · 4 / 16²; the within-cell
    # variance pools 4 cells with squares 1/2 over 8 degrees of freedom: 1/4. MDD = (t_.975,7 + t_.8,7) · √(2 V).
    variance = 8 / 7 * 4 / 256
    between = variance - 0.25 / 16
    multiplier = 2.3646242515927 + 0.8960296443137

    def mdd(v: float) -> float:
        return round(multiplier * math.sqrt(2 * v), 4)

    code, out, _ = edsb_in_process(["report", str(repeated_run), "--format", "json"], capsys)
    power = json.loads(out)["variants"]["ours"]["power"]
    assert code == 0
    assert (power["cases"], power["cells"], power["repeats"], power["runs"]) == (8, 8, 2, 16)
    assert (power["alpha"], power["power"]) == (0.05, 0.8)
    assert power["design_effect"] == pytest.approx(variance / (0.25 / 16), abs=1e-4)
    assert power["intra_case_correlation"] == pytest.approx(variance / (0.25 / 16) - 1, abs=1e-4)
    assert power["minimum_detectable_difference"] == pytest.approx(mdd(variance), abs=1e-4)
    assert power["by_repeats"] == pytest.approx(
        {str(r): mdd(between + 0.25 / (8 * r)) for r in (1, 3, 5, 10)}, abs=1e-4
    )
    assert power["by_repeats"]["3"] < power["minimum_detectable_difference"] < power["by_repeats"]["1"]
    _, markdown, _ = edsb_in_process(["report", str(repeated_run), "--format", "markdown"], capsys)
    row = (
        f"| ours | 8 | 8 | 2 | 1.14 | 0.14 | {mdd(variance):.3f} | "
        + " / ".join(f"{mdd(between + 0.25 / (8 * r)):.2f}" for r in (1, 3, 5, 10))
        + " |"
    )
    # The figure ignores the correlation between two runs on the same case: the title and a note say it is a bound.
    assert "### Power: an upper bound on the smallest difference in success a paired comparison" in markdown
    assert row in markdown and "MDD is a bound" in markdown and "`edsb compare` states what" in markdown
    code, table, _ = edsb_in_process(["report", str(repeated_run)], capsys)
    assert code == 0 and "Power: an upper bound on the smallest difference" in " ".join(table.split())
    assert f"{mdd(variance):.3f}" in table
    page = tmp_path / "report.html"
    assert edsb_in_process(["report", str(repeated_run), "--format", "html", "-o", str(page)], capsys)[0] == 0
    html = page.read_text()
    power_table = html[
        html.index('<table class="power">') : html.index("</table>", html.index('<table class="power">'))
    ]
    assert f"<td>{mdd(variance):.3f}</td>" in power_table and "<td>1.14</td>" in power_table


def test_power_needs_variation_and_repeats(run_dir: Path, capsys) -> None:
    # The fixture's scene-graph variant is one failed run: nothing varies, so no figure is claimed.
    _, out, _ = edsb_in_process(["report", str(run_dir), "--format", "json"], capsys)
    variants = json.loads(out)["variants"]
    assert variants["scene-graph"]["power"]["minimum_detectable_difference"] is None
    assert set(variants["scene-graph"]["power"]["by_repeats"].values()) == {None}
    # ours: cases 0 and 30 vary, and case 0's cell has two repeats, so the projection exists.
    assert variants["ours"]["power"]["minimum_detectable_difference"] is not None
    assert variants["ours"]["power"]["by_repeats"]["10"] is not None


def test_report_of_a_non_run_directory_is_one_line(tmp_path: Path, capsys) -> None:
    code, _, err = edsb_in_process(["report", str(tmp_path)], capsys)
    assert code == 2
    assert err.strip().count("\n") == 0 and "not a run directory" in err


def test_plot_is_written(run_dir: Path, tmp_path: Path, capsys) -> None:
    figure = tmp_path / "figures" / "success.png"
    code, _, err = edsb_in_process(["report", str(run_dir), "--format", "json", "--plot", str(figure)], capsys)
    assert code == 0 and "figure written" in err
    assert figure.read_bytes().startswith(b"\x89PNG") and figure.stat().st_size > 10_000


def test_html_report_of_hand_written_records(run_dir: Path, tmp_path: Path, capsys) -> None:
    # Records without plans or transcripts (an older edsb, a crash) still get their grid cells and drill-downs.
    code, _, err = edsb_in_process(["report", str(run_dir), "--format", "html"], capsys)
    assert code == 2 and "--format html needs -o FILE.html" in err
    page = tmp_path / "report.html"
    code, _, err = edsb_in_process(["report", str(run_dir), "--format", "html", "-o", str(page)], capsys)
    assert code == 0, err
    html = page.read_text()
    assert html.count('<details class="run"') == 6
    assert 'id="run-ours__tc30-d1-r1"' in html and "code_runtime: KeyError" in html
    assert "error: code_runtime" in html  # the grid's legend names the error kind's colour


def test_pi_failures_that_are_sampler_misses_are_counted_per_cell(tmp_path: Path, capsys) -> None:
    def annealed(case: int, status: str, miss: bool) -> dict[str, object]:
        sampler = {"collision": "bbox", "method": "reference"}
        return result_record("scene-graph", case, ["PI"], 0, 0, status) | {"sampler": sampler, "sampler_miss": miss}

    records = [
        annealed(66, "failed", True),
        annealed(67, "failed", True),
        annealed(62, "failed", False),
        annealed(60, "passed", False),
        # a line written before the sampler choice: the optimiser sampled it, no diagnostic
        result_record("ours", 60, ["PI"], 0, 0, "failed") | {"sampler": {"collision": "bbox"}},
        result_record("ours", 0, ["OA"], 0, 0, "passed"),
    ]
    run = write_run_dir(tmp_path / "pi", records)

    _, out, _ = edsb_in_process(["report", str(run), "--format", "json"], capsys)
    summary = json.loads(out)["variants"]
    assert summary["scene-graph"]["pi_sampler"]["0"] == {
        "sampler": "reference", "runs": 4, "failures": 3, "errors": 0, "sampler_misses": 2
    }  # fmt: skip
    assert summary["scene-graph"]["cells"]["PI"]["0"]["success_rate"] == 0.25  # the annealer's rate, unchanged
    assert summary["ours"]["pi_sampler"]["Total"] == {
        "sampler": "optimal",
        "runs": 1,
        "failures": 1,
        "errors": 0,
        "sampler_misses": 0,
    }

    _, out, _ = edsb_in_process(["report", str(run), "--format", "markdown"], capsys)
    assert "### PI failures that are sampler misses (the optimal sampler would have passed them)" in out
    assert "| scene-graph | 0 | reference | 4 | 3 | 0 | 2 |" in out
    assert "| ours | 0 | optimal | 1 | 1 | 0 | 0 |" in out

    page = tmp_path / "pi.html"
    code, _, err = edsb_in_process(["report", str(run), "--format", "html", "-o", str(page)], capsys)
    assert code == 0, err
    html = page.read_text()
    table = html[html.index('id="sampler-misses"') :]
    table = table[: table.index("</table>")]
    assert "<td>scene-graph</td><td>0</td><td>reference</td><td>4</td><td>3</td><td>0</td><td>2</td>" in table
    # the two missed runs, each in its summary line and its verdict
    assert html.count("a sampler miss: the optimal sampler would have passed these relationships") == 4


def test_mean_tokens_are_truncated_as_the_reference_s_token_table(tmp_path: Path, capsys) -> None:
    records = [result_record("ours", 0, ["OA"], 0, r, "passed") for r in range(3)]
    records[0]["prompt_tokens"], records[0]["completion_tokens"] = 1002, 102  # means 1000.67 and 100.67
    run = write_run_dir(tmp_path / "tokens", records)
    _, out, _ = edsb_in_process(["report", str(run), "--format", "markdown"], capsys)
    assert "| 1000 / 100 |" in out


def test_chart_axes_end_at_one(run_dir: Path) -> None:
    from edsb.report.plots import summary_figure
    from edsb.report.render import load_run

    figure = summary_figure(load_run(run_dir)[1], "a title")
    assert [axis.get_ylim() for axis in figure.axes] == [(0.0, 1.0), (0.0, 1.0)]
    assert max(figure.axes[0].get_yticks()) == 1.0


def test_error_kinds_get_colours_far_apart_and_from_the_verdict_colours() -> None:
    from edsb.report.html import ERROR_PALETTE, STATUS_COLOURS, error_kind_colours
    from edsb.results import ErrorKind

    def rgb(colour: str) -> tuple[int, ...]:
        return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))

    def distance(a: str, b: str) -> float:
        return sum((x - y) ** 2 for x, y in zip(rgb(a), rgb(b), strict=True)) ** 0.5

    colours = error_kind_colours(list(ErrorKind)[: len(ERROR_PALETTE)])
    assert len(set(colours.values())) == len(ERROR_PALETTE)
    for kind, colour in colours.items():
        assert all(distance(colour, other) > 100 for other in STATUS_COLOURS.values()), kind
        assert all(distance(colour, other) > 80 for k, other in colours.items() if k != kind), kind


def test_html_grid_follows_the_papers_variant_order(tmp_path: Path, capsys) -> None:
    records = [result_record(v, 0, ["OA"], 0, 0, "passed") for v in ("scene-graph", "wo-event", "ours", "object-list")]
    page = tmp_path / "report.html"
    run = write_run_dir(tmp_path / "run", records)
    code, _, err = edsb_in_process(["report", str(run), "--format", "html", "-o", str(page)], capsys)
    assert code == 0, err
    html = page.read_text()
    captions = [html.index(f"<caption>{v}</caption>") for v in ("ours", "wo-event", "object-list", "scene-graph")]
    assert captions == sorted(captions)
