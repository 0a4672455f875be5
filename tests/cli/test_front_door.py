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
    assert "--sampler" in run_help and "<reference|optimal>" in run_help and "(default reference)" in run_help
    score_help = " ".join(edsb("score", "--help").stdout.split())
    assert "--sampler" in score_help and "--seed" in score_help
    assert "`--tag OA --tag SS`: OA or SS" in edsb("cases", "--help").stdout
    assert "--archive" in edsb("data", "fetch", "--help").stdout
