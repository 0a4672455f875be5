"""Data on first use: a command that needs the benchmark downloads it into the per-user data directory, from a real
loopback HTTP server serving the pinned archive (built in the test) through `$EDSB_DATA_URL`; `--offline` refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from edsb.data.manifest import verify_tree
from tests.support.archive import ArchiveServer, build_archive, serve_archive
from tests.support.edsb_cli import Outcome, child_env, edsb_child
from tests.support.network import closed_port


@pytest.fixture
def pinned_archive_server() -> Iterator[ArchiveServer]:
    with serve_archive(build_archive()) as server:
        yield server


def fresh_user(tmp_path: Path, server: ArchiveServer, **extra: str) -> dict[str, str]:
    """A user with no data yet: no EDSB_DATA, the per-user dirs inside tmp_path, the archive URL on loopback."""
    return child_env(
        tmp_path / "cache", data=None, XDG_DATA_HOME=str(tmp_path / "xdg"), EDSB_DATA_URL=server.url, **extra
    )


def user_data(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "edsb" / "edsb-data"


def oracle_run(tmp_path: Path, env: dict[str, str], *extra: str) -> Outcome:
    args = ["run", "--model", "oracle", "--cases", "0", "--out", tmp_path / "run", "--quiet", *extra]
    return edsb_child(args, env=env)


def test_run_fetches_verifies_and_runs_from_an_empty_data_dir(
    tmp_path: Path, pinned_archive_server: ArchiveServer
) -> None:
    env = fresh_user(tmp_path, pinned_archive_server)
    assert not (tmp_path / "xdg").exists()
    outcome = oracle_run(tmp_path, env)
    assert outcome.returncode == 0, outcome.stderr
    lines = outcome.stderr.splitlines()
    announce, bar, verified = (
        next(i for i, line in enumerate(lines) if line.startswith(start))
        for start in ("edsb: first use: downloading", "download ", "edsb: benchmark data verified at")
    )
    assert announce < bar < verified  # what and where, then the progress bar, then the verdict
    assert pinned_archive_server.url in lines[announce] and str(user_data(tmp_path)) in lines[announce]
    assert "every sha256 verified" in lines[announce]
    assert lines[verified].endswith(str(user_data(tmp_path)))
    assert verify_tree(user_data(tmp_path)) == []
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert results and all(result["status"] == "passed" for result in results)
    assert pinned_archive_server.paths == ["/archive/pinned.tar.gz"]
    # The second command finds the copy: no download, no announcement.
    again = edsb_child(["cases", "--cases", "0"], env=env)
    assert again.returncode == 0 and "first use" not in again.stderr
    assert len(pinned_archive_server.paths) == 1


def test_download_shows_a_progress_bar(tmp_path: Path, pinned_archive_server: ArchiveServer) -> None:
    outcome = edsb_child(["cases", "--cases", "0"], env=fresh_user(tmp_path, pinned_archive_server))
    assert outcome.returncode == 0, outcome.stderr
    size_kb = len(pinned_archive_server.body) / 1000
    bar = next(line for line in outcome.stderr.splitlines() if line.startswith("download"))
    assert f"{size_kb:.1f}/{size_kb:.1f} kB" in bar  # rich's bar, drawn once at the end when stderr is no terminal


@pytest.mark.parametrize("how", ["--offline", "EDSB_OFFLINE=1", "offline = true"])
def test_offline_refuses_to_download_and_creates_nothing(
    tmp_path: Path, pinned_archive_server: ArchiveServer, how: str
) -> None:
    """`--offline`, `$EDSB_OFFLINE` and `offline = true` in a `--config` file (which takes any option) alike."""
    env = fresh_user(tmp_path, pinned_archive_server, **({"EDSB_OFFLINE": "1"} if how == "EDSB_OFFLINE=1" else {}))
    (tmp_path / "run.toml").write_text(how if how.startswith("offline") else "", encoding="utf-8")
    extra = {"--offline": ["--offline"], "offline = true": ["--config", str(tmp_path / "run.toml")]}
    outcome = oracle_run(tmp_path, env, *extra.get(how, []))
    outcome.assert_one_clear_error(2, contains="edsb data fetch --archive FILE")
    assert f"no benchmark data at {user_data(tmp_path)}" in outcome.stderr
    assert pinned_archive_server.paths == []
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "run").exists()


def test_an_unreachable_download_on_first_use_names_the_command_that_exists(tmp_path: Path) -> None:
    """`edsb run` has no --archive: the hint must name `edsb data fetch --archive FILE`, as --offline's does."""
    env = child_env(
        tmp_path / "cache",
        data=None,
        XDG_DATA_HOME=str(tmp_path / "xdg"),
        EDSB_DATA_URL=f"http://127.0.0.1:{closed_port()}/archive.tar.gz",
    )
    outcome = oracle_run(tmp_path, env)
    assert outcome.returncode != 0
    error = next(line for line in outcome.stderr.splitlines() if line.startswith("edsb: error: "))
    assert "download failed: cannot reach" in error
    assert "run `edsb data fetch --archive FILE`" in error and "pass it with" not in error
    assert "Traceback" not in outcome.stderr
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "run").exists()


def test_every_data_command_fetches_on_first_use(tmp_path: Path, pinned_archive_server: ArchiveServer) -> None:
    (tmp_path / "plans.jsonl").write_text('{"case": 13, "plan": {}}\n')
    commands = {
        "score": ["score", str(tmp_path / "plans.jsonl")],
        "show": ["show", "13", "-o", str(tmp_path / "13.png")],
        "scenes": ["scenes", "--scene", "Office", "-o", str(tmp_path / "scenes")],
    }
    for name, args in commands.items():
        home = tmp_path / name
        outcome = edsb_child(args, env=fresh_user(home, pinned_archive_server))
        assert outcome.returncode == 0, (name, outcome.stderr)
        assert "first use" in outcome.stderr and verify_tree(user_data(home)) == [], name
    assert len(pinned_archive_server.paths) == len(commands)


def test_a_tampered_download_on_first_use_leaves_nothing(tmp_path: Path, pinned_archive_server: ArchiveServer) -> None:
    pinned_archive_server.body = build_archive(tamper="benchmark/test_cases/0_OA/testcase_0.json")
    outcome = oracle_run(tmp_path, fresh_user(tmp_path, pinned_archive_server))
    assert outcome.returncode == 1
    error = outcome.stderr.strip().splitlines()[-1]
    assert error.startswith("edsb: error: download refused: benchmark/test_cases/0_OA/testcase_0.json does not match")
    assert "Traceback" not in outcome.stderr
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "run").exists()


def test_a_directory_the_user_named_is_never_downloaded_into(
    tmp_path: Path, pinned_archive_server: ArchiveServer
) -> None:
    named = tmp_path / "named"
    env = fresh_user(tmp_path, pinned_archive_server, EDSB_DATA=str(named))
    outcome = edsb_child(["cases"], env=env)
    outcome.assert_one_clear_error(1, contains=f"no benchmark data at {named}")
    assert pinned_archive_server.paths == [] and not named.exists() and not (tmp_path / "xdg").exists()


def test_data_fetch_honours_the_url_override(tmp_path: Path, pinned_archive_server: ArchiveServer) -> None:
    outcome = edsb_child(["data", "fetch"], env=fresh_user(tmp_path, pinned_archive_server))
    assert outcome.returncode == 0, outcome.stderr
    assert verify_tree(user_data(tmp_path)) == [] and len(pinned_archive_server.paths) == 1
