"""What the text report says must be true of the run: reasons for errors, reasons for missing figures, what the
token means count, one order of variants, counts in the right number, figures that tell 0 % from no runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edsb.report.cost import PRICES_AS_OF
from tests.support.edsb_cli import child_env, edsb_child, edsb_in_process
from tests.support.run_dir import result_record, write_run_dir


def _errored(variant: str, case: int, level: int, message: str, kind: str = "narrator_format") -> dict[str, object]:
    return result_record(variant, case, ["OA"], level, 0, "error", error_kind=kind, error=f"{kind}: {message}")


@pytest.fixture
def only_erred(tmp_path: Path) -> Path:
    """A sweep whose every run erred: the reply cut off mid-JSON (twice), and a code error."""
    records = [
        _errored("ours", 0, 0, "the reply is not JSON: Unterminated string starting at: line 1 column 40"),
        _errored("ours", 1, 0, "the reply is not JSON: Unterminated string starting at: line 1 column 40"),
        _errored("ours", 2, 0, "NameError: name 'sofa' is not defined", kind="code_runtime"),
    ]
    return write_run_dir(tmp_path / "smoke", records, model="local")


def test_the_text_report_shows_why_runs_erred(only_erred: Path, capsys) -> None:
    code, out, _ = edsb_in_process(["report", str(only_erred), "--format", "markdown"], capsys)
    assert code == 0
    section = out[out.index("### Why runs erred") :]
    cut_off = "narrator_format: the reply is not JSON: Unterminated string starting at: line 1 column 40"
    assert f"| ours | {cut_off} | 2 |" in section
    assert "| ours | code_runtime: NameError: name 'sofa' is not defined | 1 |" in section
    code, table, _ = edsb_in_process(["report", str(only_erred)], capsys)
    assert code == 0 and "Why runs erred" in table and "NameError: name 'sofa' is not" in table


def test_reasons_are_bounded_and_what_is_left_out_is_counted(tmp_path: Path, capsys) -> None:
    long = "x" * 500
    records = [_errored("ours", case, 0, f"KeyError: 'chair_{case}' {long}", kind="code_runtime") for case in range(13)]
    run = write_run_dir(tmp_path / "many", records)
    _, out, _ = edsb_in_process(["report", str(run), "--format", "json"], capsys)
    ours = json.loads(out)["variants"]["ours"]
    assert len(ours["error_reasons"]) == 10 and ours["error_reasons_other_runs"] == 3
    assert all(reason.endswith("characters]") and len(reason) < 340 for reason in ours["error_reasons"])
    _, table, _ = edsb_in_process(["report", str(run), "--format", "markdown"], capsys)
    assert "ours: 3 more runs with other reasons (--format samples lists each)" in table


def test_power_dashes_say_why(only_erred: Path, tmp_path: Path, capsys) -> None:
    _, out, _ = edsb_in_process(["report", str(only_erred), "--format", "markdown"], capsys)
    assert "| ours | 3 | 3 | 1 | - | - | - | - / - / - / - |" in out
    assert "-: ours: every run failed: no variation in success to estimate the variance from" in out
    varied = [result_record("ours", case, ["OA"], 0, 0, "passed" if case % 2 else "failed") for case in range(4)]
    _, out, _ = edsb_in_process(["report", str(write_run_dir(tmp_path / "varied", varied)), "--format", "json"], capsys)
    power = json.loads(out)["variants"]["ours"]["power"]
    assert power["minimum_detectable_difference"] is not None
    assert power["note"] == "the projections need a case × level cell run at least twice (--repeats 2 or more)"


def test_mean_tokens_of_errored_runs_are_explained(only_erred: Path, capsys) -> None:
    _, out, _ = edsb_in_process(["report", str(only_erred), "--format", "markdown"], capsys)
    assert "| 0 / 0 |" in out  # the paper's convention, kept
    assert (
        "ours: the mean per run counts an errored run as 0 tokens, as the paper's token table does (3 runs of 3 "
        "erred); over every run it is 1000 / 100"
    ) in out


def test_a_pi_row_of_a_run_that_erred_says_so(tmp_path: Path, capsys) -> None:
    sampler = {"collision": "bbox", "method": "reference"}
    records = [
        result_record("scene-graph", 60, ["PI"], 0, 0, "error", error_kind="sampler_anchor", error="sampler_anchor: x")
        | {"sampler": sampler},
        result_record("scene-graph", 61, ["PI"], 0, 0, "passed") | {"sampler": sampler},
    ]
    run = write_run_dir(tmp_path / "pi", records)
    _, out, _ = edsb_in_process(["report", str(run), "--format", "json"], capsys)
    cell = json.loads(out)["variants"]["scene-graph"]["pi_sampler"]["Total"]
    assert (cell["runs"], cell["failures"], cell["errors"]) == (2, 0, 1)
    _, out, _ = edsb_in_process(["report", str(run), "--format", "markdown"], capsys)
    assert "| variant | level | sampler | runs | failures | errors | sampler misses |" in out
    assert "| scene-graph | Total | reference | 2 | 0 | 1 | 0 |" in out


def test_one_variant_order_in_report_compare_and_leaderboard(tmp_path: Path, capsys) -> None:
    order = ("scene-graph", "object-list", "ours", "wo-event")  # as a user might have asked for them
    records = [result_record(v, case, ["OA"], 0, 0, "passed") for v in order for case in (0, 1)]
    base, other = write_run_dir(tmp_path / "a", records), write_run_dir(tmp_path / "b", list(reversed(records)))
    for run in (base, other):
        (run / "config.json").write_text(json.dumps({"model": "oracle", "variants": list(order)}))
    paper = ["ours", "wo-event", "object-list", "scene-graph"]
    _, out, _ = edsb_in_process(["report", str(base), "--format", "json"], capsys)
    assert list(json.loads(out)["variants"]) == paper
    assert json.loads(out)["run"]["variants"] == paper
    _, out, _ = edsb_in_process(["compare", str(base), str(other), "--format", "json"], capsys)
    comparison = json.loads(out)
    assert list(dict.fromkeys(row["variant"] for row in comparison["comparisons"][0]["rows"])) == paper
    assert list(dict.fromkeys(entry["variant"] for entry in comparison["leaderboard"])) == paper
    _, out, _ = edsb_in_process(["compare", str(base), str(other), "--format", "markdown"], capsys)
    assert "| run | ours | wo-event | object-list | scene-graph |" in out


def test_counts_of_one_are_singular(tmp_path: Path, capsys) -> None:
    base = write_run_dir(tmp_path / "a", [result_record("ours", 0, ["OA"], 0, 0, "passed")])
    other = write_run_dir(tmp_path / "b", [result_record("ours", 0, ["OA"], 0, 0, "failed")])
    _, out, _ = edsb_in_process(["compare", str(base), str(other), "--format", "markdown"], capsys)
    assert "paired differences over 1 shared run" in out and "1 shared runs" not in out


def test_the_figure_leaves_out_tags_no_one_ran_and_marks_missing_bars(tmp_path: Path) -> None:
    from edsb.report.plots import summary_figure
    from edsb.report.render import load_run

    records = [
        result_record("ours", 0, ["OA"], 0, 0, "failed"),  # a real 0 %
        result_record("ours", 60, ["PI"], 0, 0, "passed"),
        result_record("wo-event", 0, ["OA"], 0, 0, "passed"),  # w/o Event runs no PI case
    ]
    figure = summary_figure(load_run(write_run_dir(tmp_path / "run", records))[1])
    by_tag = figure.axes[0]
    assert [label.get_text() for label in by_tag.get_xticklabels()] == ["Total", "OA", "PI"]  # no RC, no SS
    texts = [text.get_text() for text in by_tag.texts]
    assert texts.count("no runs") == 1  # w/o Event at PI
    assert "0.00" in texts  # ours at OA: a bar of 0 says so


def test_the_tokens_table_header_fits_one_line_at_80_columns(tmp_path: Path) -> None:
    """Its explanations are notes under the table (what the mean counts, where the price comes from), so the header
    does not wrap over six lines."""
    run = write_run_dir(tmp_path / "run", [result_record("ours", 13, ["RC"], 0, 0, "passed")])
    printed = edsb_child(["report", run], env=child_env(COLUMNS="80"))
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    top = lines.index("Tokens (prompt / completion)") + 1
    rule = next(n for n in range(top, len(lines)) if lines[n].startswith("┡"))
    assert len(lines[top + 1 : rule]) <= 2 and "┃ variant ┃ narrator" in lines[rule - 1]  # was 6 lines
    assert lines[rule + 3 : rule + 5] == [
        "mean per run: the paper's, in which an errored run counts 0 tokens",
        f"cost: built-in list price as of {PRICES_AS_OF['openai']}",  # the records' model is gpt-4o's
    ]
    assert all(len(line) <= 80 for line in lines)
    markdown = edsb_child(["report", run, "--format", "markdown"], env=child_env(COLUMNS="80"))
    assert "| variant | narrator | event parser | mean per run | cost |" in markdown.stdout
