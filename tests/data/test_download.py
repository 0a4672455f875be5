"""`edsb data fetch` against a real loopback HTTP server serving an archive built from the data directory."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from edsb.data.download import fetch_data
from edsb.data.manifest import verify_tree
from edsb.errors import DataError
from tests.support.archive import ArchiveServer, build_archive, serve_archive
from tests.support.edsb_cli import child_env, edsb_child, edsb_in_process
from tests.support.network import closed_port


@pytest.fixture
def archive_server() -> Iterator[ArchiveServer]:
    with serve_archive() as server:
        yield server


def test_fetch_installs_only_benchmark_files_and_verifies(tmp_path: Path, archive_server: ArchiveServer) -> None:
    archive_server.body = build_archive()
    dest = tmp_path / "data"
    fetch_data(dest, archive_server.url)
    assert verify_tree(dest) == []
    assert not (dest / "main.py").exists()
    assert (dest / "SHA256SUMS").is_file()
    # A verified copy is kept as is: no second download.
    fetch_data(dest, archive_server.url)
    assert len(archive_server.paths) == 1


def test_tampered_file_is_refused_and_nothing_is_left(tmp_path: Path, archive_server: ArchiveServer) -> None:
    archive_server.body = build_archive(tamper="benchmark/test_cases/0_OA/testcase_0.json")
    dest = tmp_path / "data"
    with pytest.raises(DataError, match=r"testcase_0\.json does not match its pinned sha256"):
        fetch_data(dest, archive_server.url)
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []


def test_tampered_download_keeps_previous_good_copy(tmp_path: Path, archive_server: ArchiveServer) -> None:
    archive_server.body = build_archive()
    dest = tmp_path / "data"
    fetch_data(dest, archive_server.url)
    archive_server.body = build_archive(drop="configs/scenes/House/objects.json")
    with pytest.raises(DataError, match="missing from the archive"):
        fetch_data(dest, archive_server.url, force=True)
    assert verify_tree(dest) == []


def test_garbage_body_is_a_clear_error(tmp_path: Path, archive_server: ArchiveServer) -> None:
    archive_server.body = b"<html>not an archive</html>"
    with pytest.raises(DataError, match="not a readable archive"):
        fetch_data(tmp_path / "data", archive_server.url)


def test_unreachable_url_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}/archive.tar.gz"
    outcome = edsb_in_process(["data", "fetch", "--dest", str(tmp_path / "data"), "--url", url], capsys)
    assert outcome.returncode == 1
    error = outcome.stderr.strip()
    assert error.startswith("edsb: error: download failed: cannot reach")
    assert "\n" not in error and "Traceback" not in error
    assert not (tmp_path / "data").exists()


def test_optional_runner_file_is_verified_too(tmp_path: Path, archive_server: ArchiveServer) -> None:
    archive_server.body = build_archive(runner=b"guidelines = 'not the pinned file'\n")
    with pytest.raises(DataError, match=r"benchmark/runner\.py does not match its pinned sha256"):
        fetch_data(tmp_path / "data", archive_server.url)
    assert not (tmp_path / "data").exists()


def _cli_env(tmp_path: Path) -> dict[str, str]:
    """No EDSB_DATA, and the per-user data directory inside the test's tmp dir."""
    return child_env(data=None, XDG_DATA_HOME=str(tmp_path / "xdg"))


def test_fetch_from_a_local_archive_through_the_cli(tmp_path: Path) -> None:
    archive = tmp_path / "pinned.tar.gz"
    archive.write_bytes(build_archive())
    dest = tmp_path / "deep" / "data"
    env = _cli_env(tmp_path)
    result = edsb_child(["data", "fetch", "--archive", str(archive), "--dest", str(dest)], env=env)
    assert result.returncode == 0, result.stderr
    assert verify_tree(dest) == [] and not (dest / "main.py").exists()
    checked = edsb_child(["data", "check", "--data", str(dest)], env=env)
    assert checked.returncode == 0 and "cases: 40" in checked.stdout


def test_fetch_from_a_local_zip_archive(tmp_path: Path) -> None:
    """GitHub also serves the archive as a zip; the same top folder layout is expected."""
    archive = tmp_path / "pinned.zip"
    with tarfile.open(fileobj=io.BytesIO(build_archive()), mode="r:gz") as tar, zipfile.ZipFile(archive, "w") as z:
        for member in tar:
            source = tar.extractfile(member)
            assert source is not None
            z.writestr(member.name, source.read())
    fetch_data(tmp_path / "data", archive=archive)
    assert verify_tree(tmp_path / "data") == []


def test_a_missing_or_bad_local_archive_leaves_no_directory(tmp_path: Path) -> None:
    env = _cli_env(tmp_path)
    missing = edsb_child(["data", "fetch", "--archive", str(tmp_path / "nope.tar.gz")], env=env)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"edsb: error: --archive {tmp_path / 'nope.tar.gz'}: no such file"
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"<html>not an archive</html>")
    bad = edsb_child(["data", "fetch", "--archive", str(garbage)], env=env)
    assert bad.returncode == 1 and "is not a readable archive" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "xdg").exists()  # the default data directory and its parents were not left behind


def test_unreachable_url_suggests_a_local_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}/archive.tar.gz"
    outcome = edsb_in_process(["data", "fetch", "--dest", str(tmp_path / "a" / "b" / "data"), "--url", url], capsys)
    assert outcome.returncode == 1
    assert "--archive FILE" in outcome.stderr
    assert list(tmp_path.iterdir()) == []


def _repack(archive: Path, rename) -> None:
    """The test archive with every member renamed by `rename` (dropped where it returns None)."""
    with tarfile.open(fileobj=io.BytesIO(build_archive()), mode="r:gz") as source, tarfile.open(archive, "w:gz") as tar:
        for member in source:
            name = rename(member.name)
            if name is None:
                continue
            info = tarfile.TarInfo(name)
            info.size = member.size
            tar.addfile(info, source.extractfile(member))


@pytest.mark.parametrize(
    ("rename", "says"),
    [
        (lambda name: name.split("/", 1)[1], "holds the benchmark files at its top level; they must be inside one"),
        (lambda name: f"outer/{name}", "holds none of the benchmark files inside one top-level folder"),
    ],
    ids=["no top folder", "two folders deep"],
)
def test_a_local_archive_laid_out_otherwise_says_what_is_wrong(tmp_path: Path, rename, says: str) -> None:
    archive = tmp_path / "repacked.tar.gz"
    _repack(archive, rename)
    outcome = edsb_child(
        ["data", "fetch", "--archive", str(archive), "--dest", str(tmp_path / "d")], env=_cli_env(tmp_path)
    )
    outcome.assert_one_clear_error(1, contains=f"--archive {archive} {says}")
    assert "download" not in outcome.stderr and not (tmp_path / "d").exists()


def test_a_local_archive_missing_a_file_is_refused_without_saying_download(tmp_path: Path) -> None:
    archive = tmp_path / "short.tar.gz"
    _repack(archive, lambda name: None if name.endswith("House/objects.json") else name)
    with pytest.raises(DataError, match=f"--archive {archive} refused: configs/scenes/House/objects.json is missing"):
        fetch_data(tmp_path / "data", archive=archive)
