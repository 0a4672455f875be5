"""What a newcomer reads first: the version, and help texts that say what options do and default to."""

from __future__ import annotations

from edsb import __version__


def test_version(edsb) -> None:
    outcome = edsb("--version")
    assert (outcome.returncode, outcome.stdout) == (0, f"edsb {__version__}\n")


def test_help_texts_keep_brackets_and_show_defaults(edsb, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one help line per option, so phrases are not wrapped apart
    assert '"sampled_position": [x, y] or null' in edsb("score", "--help").stdout
    assert "connection errors (default 6)" in edsb("run", "--help").stdout
    run_help = " ".join(edsb("run", "--help").stdout.split())
    assert "--sampler SAMPLER" in run_help and "(default reference)" in run_help
    assert "sampler: `reference`, the paper's simulated annealing" in run_help and "or `optimal`" in run_help
    score_help = " ".join(edsb("score", "--help").stdout.split())
    assert "--sampler" in score_help and "--seed" in score_help
    assert "`--tag OA --tag SS`: OA or SS" in edsb("cases", "--help").stdout
    assert "--archive" in edsb("data", "fetch", "--help").stdout


def test_help_at_80_columns_has_whole_choices_and_one_kind_of_placeholder(edsb, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    pages = {
        command: edsb(*command.split(), "--help").stdout
        for command in ("", "run", "report", "compare", "cases", "show", "scenes", "score", "check-model", "data fetch")
    }
    for command, page in pages.items():
        assert "<bool>" not in page and "<path>" not in page and "<str>" not in page, command
        assert "{run_dir}" not in page and "<list[" not in page, command
    words = " ".join(" ".join(line.strip("│ ").split()) for line in pages["report"].splitlines())
    for choice in ("table", "markdown", "csv", "json", "html"):
        assert f" {choice}" in words
    run_page = " ".join(pages["run"].split())
    for variant in ("ours,", "wo-event,", "object-list,", "scene-graph", "direct"):
        assert variant in run_page
    assert "--out DIR" in " ".join(pages["run"].replace("│", " ").split())
    for command in ("run", "check-model"):
        flat = " ".join(pages[command].replace("│", " ").split())
        assert "`oracle-wrong`" in flat and "`local:<file.gguf>`" in flat, command
    assert "{RUN_DIR}" in pages["report"] and "RUN_DIR..." in pages["compare"]


def test_data_fetch_help_names_the_archive_to_download_by_hand(edsb, monkeypatch) -> None:
    from edsb.data.download import ARCHIVE_NAME, ARCHIVE_URL

    monkeypatch.setenv("COLUMNS", "200")
    page = edsb("data", "fetch", "--help").stdout
    assert ARCHIVE_URL in page and ARCHIVE_NAME in page


def test_report_writes_every_format_to_the_file_named_by_o(edsb, finished, tmp_path) -> None:
    run_dir, _ = finished
    for fmt, marker in (("markdown", "| variant"), ("csv", "variant,"), ("json", '"variants"'), ("table", "variant")):
        target = tmp_path / f"report.{fmt}"
        outcome = edsb("report", str(run_dir), "--format", fmt, "-o", str(target))
        assert outcome.returncode == 0, outcome.stderr
        assert marker in target.read_text(), fmt
        assert marker not in outcome.stdout and f"report written to {target}" in outcome.stderr


def test_score_on_empty_input_is_an_error(edsb, tmp_path) -> None:
    empty = tmp_path / "plans.jsonl"
    empty.write_text("")
    edsb("score", str(empty)).assert_one_clear_error(2, contains="no plans to score")


def test_a_sweep_that_only_errs_says_why_under_its_table(edsb, tmp_path) -> None:
    from tests.support.openai_server import OpenAIServer, Reply

    out = tmp_path / "run"
    with OpenAIServer(lambda request: Reply.completion("Sure! Here is what David does.")) as server:
        outcome = edsb(
            "run", "--model", "openai:prose", "--base-url", server.base_url, "--cases", "13,60", "--distraction", "0",
            "--quiet", "--no-cache", "--out", str(out),
        )  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    assert f"execution errors by kind: narrator_format 2; `edsb report {out}` shows their reasons" in outcome.stderr


def test_a_sweep_without_a_single_pass_points_at_the_report(tmp_path) -> None:
    from edsb.cli import _why_runs_failed
    from edsb.report.summary_types import RunSummary

    def summary(variants: dict[str, float]) -> RunSummary:
        runs = {"runs": 1, "incomplete": 0, "incomplete_kinds": {}}
        return RunSummary.model_validate({"variants": {v: {**runs, "success_rate": r} for v, r in variants.items()}})

    text = f"no run passed; `edsb report {tmp_path}` lists why the plans failed"
    assert _why_runs_failed(summary({"ours": 0.0, "direct": 0.0}), tmp_path) == text
    assert _why_runs_failed(summary({"ours": 0.5}), tmp_path) is None
