"""Headless Chromium for tests, through Playwright: the system's own browser (Debian's `chromium` package), else the
one `python -m playwright install chromium` put in Playwright's cache (macOS, Windows, distributions without it).

Without either a browser test skips with one line saying what to install, unless `$EDSB_REQUIRE_BROWSER` is set
(`.ci/run` sets it): then it fails, so CI never passes by skipping them.

Playwright reports the requests of the page and its workers, never the browser's own traffic (component updates,
clock, account and connectivity probes, which differ between Chromium builds), so "the page fetched nothing" is a
statement about the page. Every request that is not a `file:` or `data:` URL is recorded and aborted: a page that
tries to fetch is seen, and reaches nothing.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REQUIRE_BROWSER = "EDSB_REQUIRE_BROWSER"
MISSING = (
    "Chromium not found: install Debian's package (`apt-get install chromium`) or Playwright's build "
    "(`python -m playwright install chromium`)"
)
# Start the browser so that it does as little on its own as it can; Playwright adds a fresh empty profile.
CHROMIUM_FLAGS = (
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@dataclass
class Browser:
    """One page of a headless Chromium and what it tried to fetch."""

    page: Any  # playwright.sync_api.Page
    fetched: list[str] = field(default_factory=list)  # URLs other than file: and data: the page asked for

    def open(self, path: Path, fragment: str = "") -> None:
        self.page.goto(path.as_uri() + fragment)
        self.page.wait_for_load_state("load")

    def evaluate(self, script: str, argument: Any = None) -> Any:
        return self.page.evaluate(script, argument)


@functools.cache
def find_chromium() -> str | None:
    """`chromium` (or `chromium-browser`) on PATH, else Playwright's own build if it is installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        bundled = Path(playwright.chromium.executable_path)
    return str(bundled) if bundled.is_file() else None


def require_chromium() -> str:
    """The Chromium to run; without one, skip the test (or fail it when `$EDSB_REQUIRE_BROWSER` is set)."""
    found = find_chromium()
    if found:
        return found
    if os.environ.get(REQUIRE_BROWSER, "").strip() not in ("", "0"):
        pytest.fail(f"{MISSING}; ${REQUIRE_BROWSER} is set, so the browser tests may not skip", pytrace=False)
    pytest.skip(MISSING)


@contextmanager
def chromium_page(width: int = 1200, height: int = 1600) -> Iterator[Browser]:
    """A page in headless Chromium (the system's), with every non-local request recorded and refused."""
    from playwright.sync_api import sync_playwright

    executable = require_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=list(CHROMIUM_FLAGS))
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            result = Browser(context.new_page())

            def route(route: Any) -> None:
                url = route.request.url
                if url.startswith(("file:", "data:")):
                    route.continue_()
                else:
                    result.fetched.append(url)
                    route.abort()

            context.route("**/*", route)
            yield result
        finally:
            browser.close()
