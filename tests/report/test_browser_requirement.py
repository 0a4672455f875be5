"""Without Chromium the browser tests skip with one line saying what to install, unless `$EDSB_REQUIRE_BROWSER` says
the browser is required, as `.ci/run` does: then they fail. A browser test run by pytest in a child whose PATH and
Playwright cache hold no Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.browser import MISSING, REQUIRE_BROWSER
from tests.support.data import REPO

PROBE = """
from tests.support.browser import chromium_page


def test_a_page_opens():
    with chromium_page():
        pass
"""


def probe_without_chromium(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    environment = {name: value for name, value in os.environ.items() if name != REQUIRE_BROWSER}
    environment.update(
        PATH=str(Path(sys.executable).parent),  # no chromium there
        PLAYWRIGHT_BROWSERS_PATH=str(tmp_path / "no-browsers"),  # nor a build of Playwright's
        PYTHONPATH=str(REPO),
        **env,
    )
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_probe.py"]
    return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)


def test_without_chromium_a_browser_test_skips_saying_what_to_install(tmp_path: Path) -> None:
    done = probe_without_chromium(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (reason,) = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reason.endswith(MISSING) and "apt-get install chromium" in reason
    assert "1 skipped" in done.stdout


def test_with_the_browser_required_it_fails_instead(tmp_path: Path) -> None:
    done = probe_without_chromium(tmp_path, **{REQUIRE_BROWSER: "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{MISSING}; ${REQUIRE_BROWSER} is set" in done.stdout
    assert "1 failed" in done.stdout


def test_ci_requires_the_browser() -> None:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert f"export {REQUIRE_BROWSER}=1" in script.splitlines()
