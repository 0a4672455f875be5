"""The HTML report opened in headless Chromium: tables and a run's drill-down are there, and nothing leaves the page.

A real run (loopback server, scripted model) plus one failed run written by hand. Chromium is sent through a
logging proxy on 127.0.0.1, so any http(s) fetch the page made would be seen; a control page with one external
image proves the proxy does see such fetches.
"""

from __future__ import annotations

import json
import shutil
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from edsb.data.benchmark import Benchmark
from tests.support.edsb_cli import isolate_environment, run_edsb
from tests.support.openai_server import OpenAIServer
from tests.support.scripted_stories import StoryModel

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _LoggingProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.requests: list[str] = []
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline(4096).decode("latin-1").strip()
        if line:
            self.server.requests.append(line)  # type: ignore[attr-defined]
        self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


# What Chromium itself contacts (component updates, clock, accounts) whatever page it shows.
BROWSER_OWN_HOSTS = ("update.googleapis.com", "clients2.google.com", "accounts.google.com")


def page_requests(proxy: _LoggingProxy) -> list[str]:
    return [line for line in proxy.requests if not any(host in line for host in BROWSER_OWN_HOSTS)]


@pytest.fixture
def proxy() -> Iterator[_LoggingProxy]:
    server = _LoggingProxy()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def chromium(page: Path, proxy: _LoggingProxy, profile: Path, *extra: str, fragment: str = "") -> str:
    assert CHROMIUM, "chromium is not installed (.ci/run installs Debian's chromium package)"
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--proxy-server=http://127.0.0.1:{proxy.server_address[1]}",
        "--proxy-bypass-list=<-loopback>", "--virtual-time-budget=5000", *extra, page.as_uri() + fragment,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def run_dir(benchmark: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    out = root / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate_environment(monkeypatch, root / "cache")
        with OpenAIServer(StoryModel(benchmark.cases)) as server:
            code = run_edsb(
                "run", "--model", "openai:scripted", "--base-url", server.base_url, "--cases", "13,60",
                "--distraction", "0", "--repeats", "1", "--max-retries", "0", "--quiet", "--out", str(out),
            )  # fmt: skip
    assert code == 0
    failed = {
        "key": "ours/tc13-d0-r1",
        "variant": "ours",
        "case": 13,
        "distraction": 0,
        "repeat": 1,
        "tags": ["RC"],
        "status": "failed",
        "passed": False,
        "plan": {"David": {"target_action": ["eat", "sit"], "relationships": ["sit on chair_3"]}},
        "reason": "David: relationships ['sit on chair_3'] do not satisfy the expected seats",
    }
    with (out / "results.jsonl").open("a") as handle:
        handle.write(json.dumps(failed) + "\n")
    return out


def test_report_in_chromium_has_tables_and_drill_down_and_fetches_nothing(
    run_dir: Path, tmp_path: Path, proxy: _LoggingProxy
) -> None:
    page = tmp_path / "report.html"
    assert run_edsb("report", str(run_dir), "--format", "html", "-o", str(page)) == 0
    html = page.read_text()
    assert "http://" not in html and "https://" not in html
    dom = chromium(page, proxy, tmp_path / "profile", "--dump-dom", fragment="#run-ours__tc13-d0-r0")
    assert 'class="summary"' in dom and "Distraction level 0" in dom
    assert 'id="run-ours__tc13-d0-r1"' in dom and "do not satisfy the expected seats" in dom
    start = dom.find('<details class="run" id="run-ours__tc13-d0-r0" open="">')
    assert start >= 0, "the run named in the address is not open"
    drill_down = dom[start : dom.find('<details class="run"', start + 1)]
    # the page's script filled in the prompts and replies from the transcripts
    assert "Request 1 (narrator)" in drill_down and "Request 2 (event_parser)" in drill_down
    assert "[User Instruction]" in drill_down and "Executed code" in drill_down and "<svg" in drill_down
    screenshot = tmp_path / "report.png"
    chromium(
        page, proxy, tmp_path / "profile2", f"--screenshot={screenshot}", "--window-size=1200,1600",
        fragment="#run-ours__tc13-d0-r1",
    )  # fmt: skip
    assert screenshot.stat().st_size > 10_000
    assert page_requests(proxy) == []


def test_the_proxy_would_see_a_page_that_fetches(tmp_path: Path, proxy: _LoggingProxy) -> None:
    page = tmp_path / "control.html"
    page.write_text('<html><body><img src="http://example.invalid/pixel.png"></body></html>')
    chromium(page, proxy, tmp_path / "profile", "--dump-dom")
    assert any("example.invalid" in request for request in page_requests(proxy))
