"""`edsb compare --format html`: the board opened in headless Chromium.

Three real runs of six cases (the oracle, its negative control, and the oracle's results with three verdicts
changed by hand), the HTML reports of two of them beside the board. The page must show every run, a forest plot
with a row per later run and variant, drawn, and the cases that flip, each flipped run linking to its drill-down
in the reports that exist; it must hold no address beyond the page, and Chromium is started so that it makes no
request of its own.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.browser import require_chromium
from tests.support.edsb_cli import isolate_environment, run_edsb
from tests.support.network import block_network

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--virtual-time-budget=3000",
)  # fmt: skip
SIGNIFICANT = (0xB0, 0x3A, 0x2E)  # the forest plot's colour for an interval that excludes 0
NOT_SIGNIFICANT = (0x1F, 0x5F, 0xA8)
FLIPPED = ("ours/tc13-d1-r0", "ours/tc30-d0-r0", "scene-graph/tc00-d2-r0")
CASES = (0, 1, 13, 14, 30, 31)  # six: the fewest whose every-case flip a test at 5% can call (2 · 2⁻⁶ < 0.05)


def chromium(page: Path, profile: Path, *extra: str) -> str:
    command = [require_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("board")
    runs = {name: root / name for name in ("oracle", "wrong", "edited")}
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, root / "cache")
        block_network(monkeypatch, allow_loopback=False)
        for name, model in (("oracle", "oracle"), ("wrong", "oracle-wrong")):
            code = run_edsb(
                "run", "--model", model, "--preset", "table1", "--variant", "ours", "--variant", "scene-graph",
                "--cases", ",".join(map(str, CASES)), "--repeats", "1", "--out", runs[name], "--quiet",
            )  # fmt: skip
            assert code == 0
        # The oracle's results with three runs failed by hand: a run that flips against the oracle, and against
        # the negative control is the same as the oracle everywhere else.
        runs["edited"].mkdir()
        shutil.copy(runs["oracle"] / "config.json", runs["edited"] / "config.json")
        lines = [json.loads(line) for line in (runs["oracle"] / "results.jsonl").read_text().splitlines()]
        for line in lines:
            if line["key"] in FLIPPED:
                line.update(status="failed", passed=False, reason="changed by the test")
        (runs["edited"] / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        pages = root / "pages"
        pages.mkdir()
        assert run_edsb("report", runs["oracle"], "--format", "html", "-o", pages / "oracle.html") == 0
        assert run_edsb("report", runs["edited"], "--format", "html", "-o", runs["edited"] / "report.html") == 0
        page = pages / "board.html"
        assert run_edsb("compare", runs["oracle"], runs["wrong"], runs["edited"], "--format", "html", "-o", page) == 0
    return page, runs


def test_the_board_in_chromium(board: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    page, runs = board
    html = page.read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "the board must not refer to anything beyond itself"
    dom = chromium(page, tmp_path / "profile", "--dump-dom")
    runs_table = dom[dom.index('<table class="runs">') : dom.index("</table>", dom.index('<table class="runs">'))]
    for name in runs:
        assert f"<td>{name}</td>" in runs_table
    leaderboard = dom[dom.index('<table class="leaderboard">') :]
    leaderboard = leaderboard[: leaderboard.index("</table>")]
    # Every case agrees, so the clustered interval has no width: Wilson's over the runs stands in, marked `*`.
    assert "<td>oracle</td><td>1.0 (1.0) [0.82, 1.00]*</td><td>1.0 (1.0) [0.82, 1.00]*</td>" in leaderboard
    assert "<td>wrong</td><td>0.0 (1.0) [0.00, 0.18]*</td>" in leaderboard
    # The forest plot: a drawn row per later run and variant, the negative control's at −1.
    forest = dom[dom.index('<svg class="forest"') : dom.index("</svg>", dom.index('<svg class="forest"'))]
    rows = re.findall(
        r'<g class="forest-row( significant)?" data-run="([^"]+)">.*?<text[^>]*>([^<]+)</text>', forest, re.S
    )
    assert sorted((run, label) for _, run, label in rows) == [
        ("edited", "edited · ours"), ("edited", "edited · scene-graph"),
        ("wrong", "wrong · ours"), ("wrong", "wrong · scene-graph"),
    ]  # fmt: skip
    assert all(significant for significant, run, _ in rows if run == "wrong")
    assert forest.count('class="estimate"') == 4 and "-1.00 [-1.00, -1.00]" in forest
    # The cases that flip, linked to the drill-downs in the reports beside the board.
    discordant = dom[dom.index('<table class="discordant">') :]
    discordant = discordant[: discordant.index("</table>")]
    flips = re.findall(r'<tr class="flip" id="flip-\d+"><td>([^<]+)</td><td>([^<]+)</td><td>(\d+)</td>', discordant)
    assert {(run, variant, int(case)) for run, variant, case in flips if run == "edited"} == {
        ("edited", "ours", 13), ("edited", "ours", 30), ("edited", "scene-graph", 0),
    }  # fmt: skip
    assert {(variant, int(case)) for run, variant, case in flips if run == "wrong"} == {
        (variant, case) for variant in ("ours", "scene-graph") for case in CASES
    }
    links = set(re.findall(r'href="([^"]+)"', discordant))
    for key in FLIPPED:
        anchor = "run-" + key.replace("/", "__")
        assert f"oracle.html#{anchor}" in links
        assert f"../edited/report.html#{anchor}" in links
        for target in (page.parent / "oracle.html", runs["edited"] / "report.html"):
            assert f'id="{anchor}"' in target.read_text()  # the drill-down the link opens exists
    assert not any("wrong" in link for link in links)  # the negative control has no report beside the board
    screenshot = tmp_path / "board.png"
    chromium(page, tmp_path / "profile2", f"--screenshot={screenshot}", "--window-size=1200,1400")
    from PIL import Image

    pixels = np.asarray(Image.open(screenshot).convert("RGB"), dtype=np.int16)

    def painted(colour: tuple[int, int, int]) -> int:
        return int((np.abs(pixels - np.array(colour)).max(axis=-1) <= 12).sum())

    # The negative control's two points at −1 (red, intervals of zero width) and the edited run's intervals (blue).
    assert painted(SIGNIFICANT) > 30 and painted(NOT_SIGNIFICANT) > 100
