"""`edsb data fetch`, and the same on first use: download the reference repository at the pinned commit, keep only
the benchmark files.

Everything is extracted into a scratch directory next to the destination and verified against the pinned manifest
before it is moved into place, so a tampered or truncated archive leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zipfile
from contextlib import nullcontext
from pathlib import Path, PurePosixPath
from typing import Any

from edsb import REFERENCE_COMMIT, REFERENCE_REPO
from edsb.data.location import CASES_DIR, explicit_data_dir, resolve_data_dir
from edsb.data.manifest import OPTIONAL_FILES, load_manifest, manifest_text, sha256_file, verify_tree
from edsb.errors import DataError, OfflineError, UsageError

DEFAULT_URL = f"https://github.com/{REFERENCE_REPO}/archive/{REFERENCE_COMMIT}.tar.gz"
# Where that address redirects, and the file name a browser saves it under: what to fetch by hand for --archive.
ARCHIVE_URL = f"https://codeload.github.com/{REFERENCE_REPO}/tar.gz/{REFERENCE_COMMIT}"
ARCHIVE_NAME = f"{REFERENCE_REPO.split('/')[1]}-{REFERENCE_COMMIT}.tar.gz"
URL_ENV = "EDSB_DATA_URL"  # a mirror of that archive (firewalled machines, tests); verified all the same
OFFLINE_ENV = "EDSB_OFFLINE"
ARCHIVE_SIZE = "2.5 MB"  # GitHub's tar.gz of the pinned commit; the benchmark files kept from it are ~0.8 MB
FETCH_FROM_FILE = "edsb data fetch --archive FILE"  # the one command that installs a copy made elsewhere


def archive_url() -> str:
    """Where the pinned archive is downloaded from: `$EDSB_DATA_URL`, else GitHub."""
    return os.environ.get(URL_ENV) or DEFAULT_URL


def without_network(archive: str = "that archive") -> str:
    """What to do without network access, in the same words wherever a download cannot happen (`edsb data fetch`,
    and the first use of every command that needs the data, which has no --archive of its own)."""
    return f"download {archive} elsewhere and run `{FETCH_FROM_FILE}`"


def offline_by_env() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in {"", "0", "false", "no", "off"}


def _progress() -> Any:
    """A rich progress bar on stderr (rich draws it live on a terminal, once at the end elsewhere)."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    return Progress(
        TextColumn("download"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )


def _download(url: str, target: Path, timeout: float, progress: bool = False) -> None:
    import httpx  # here, not at the top: every `edsb` command imports this module (the CLI names its variables)

    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as response:
            if response.status_code != 200:
                raise DataError(f"download failed: {url} answered HTTP {response.status_code}")
            size = response.headers.get("Content-Length")
            with target.open("wb") as handle, _progress() if progress else nullcontext() as bar:
                task = bar.add_task("download", total=int(size) if size and size.isdigit() else None) if bar else None
                for chunk in response.iter_bytes():
                    handle.write(chunk)
                    if bar is not None and task is not None:
                        bar.advance(task, len(chunk))
    except httpx.HTTPError as exc:
        raise DataError(
            f"download failed: cannot reach {url} ({type(exc).__name__}: {exc}); without network access, "
            f"{without_network()}"
        ) from None


def _strip_top(name: str) -> str | None:
    """Archive members live under one top-level folder (`<repo>-<commit>/`); return the path inside it."""
    parts = PurePosixPath(name).parts
    if len(parts) < 2 or any(part == ".." for part in parts):
        return None
    return str(PurePosixPath(*parts[1:]))


def _extract_wanted(archive: Path, wanted: set[str], scratch: Path, label: str) -> list[str]:
    """Copy the wanted members (by path inside the top folder) into scratch; nothing else is written. Returns the
    names of all members, for saying what is wrong with an archive laid out otherwise."""
    names: list[str] = []

    def write(relative: str, source) -> None:
        destination = scratch / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        with destination.open("wb") as out:
            shutil.copyfileobj(source, out)

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                names.append(info.filename)
                relative = _strip_top(info.filename)
                if relative in wanted and not info.is_dir():
                    with zipped.open(info) as source:
                        write(relative, source)
        return names
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                names.append(member.name)
                relative = _strip_top(member.name)
                if relative in wanted and member.isfile():
                    extracted = tar.extractfile(member)
                    if extracted is not None:
                        write(relative, extracted)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise DataError(f"{label} is not a readable archive ({exc})") from None
    return names


def _layout_problem(names: list[str], wanted: set[str], label: str) -> str | None:
    """Why an archive that holds none of the benchmark files where expected is not the reference's archive, or
    None when the files are where they belong (one top-level folder, as GitHub packs a commit)."""
    inside = sum(_strip_top(name) in wanted for name in names)
    at_top = sum(PurePosixPath(name).as_posix() in wanted for name in names)
    if inside >= at_top and inside:
        return None
    folder = f"inside one top-level folder ({REFERENCE_REPO.split('/')[1]}-<commit>/), as GitHub packs a commit"
    if at_top:
        return f"{label} holds the benchmark files at its top level; they must be {folder}"
    return (
        f"{label} holds none of the benchmark files {folder}: is it the archive of {REFERENCE_REPO} at the pinned "
        "commit?"
    )


def _missing_parents(path: Path) -> list[Path]:
    """The ancestors of path that do not exist yet, deepest first (what a failed fetch must remove again)."""
    return [parent for parent in path.parents if not parent.exists()]


def fetch_data(
    dest: Path,
    url: str | None = None,
    *,
    archive: Path | None = None,
    force: bool = False,
    timeout: float = 120.0,
    progress: bool = False,
) -> Path:
    """Download (or read `archive`, a local copy of the same archive), verify and install the benchmark files into
    dest; returns dest.

    An existing complete copy is kept unless force is set. On any failure dest is left as it was, and directories
    created for it are removed again. `url` defaults to `archive_url()`.
    """
    dest = Path(dest).expanduser()
    url = url or archive_url()
    if archive is not None:
        archive = Path(archive).expanduser()
        if archive.is_dir():
            raise UsageError(
                f"--archive {archive}: is a directory, not an archive file; for benchmark files already unpacked "
                f"there, pass `--data {archive}` to the command that needs them (or set EDSB_DATA)"
            )
        if not archive.is_file():
            raise DataError(f"--archive {archive}: no such file")
    manifest = load_manifest()
    if dest.exists() and not force and not verify_tree(dest, manifest):
        return dest
    created = _missing_parents(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        _install(dest, url, archive, manifest, timeout, progress)
    except BaseException:
        for parent in created:  # deepest first; a directory someone else filled meanwhile stays
            try:
                parent.rmdir()
            except OSError:
                break
        raise
    return dest


def _install(
    dest: Path, url: str, local_archive: Path | None, manifest: dict[str, str], timeout: float, progress: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix=".edsb-fetch-", dir=dest.parent) as work:
        work_dir = Path(work)
        if local_archive is None:
            archive = work_dir / "archive"
            _download(url, archive, timeout, progress)
        else:
            archive = local_archive
        scratch = work_dir / "tree"
        scratch.mkdir()
        label = "the download" if local_archive is None else f"--archive {local_archive}"
        refused = "download refused" if local_archive is None else f"--archive {local_archive} refused"
        wanted = set(manifest) | set(OPTIONAL_FILES)
        problem = _layout_problem(_extract_wanted(archive, wanted, scratch, label), wanted, label)
        if problem is not None:
            raise DataError(problem)
        for name, expected in manifest.items():
            path = scratch / name
            if not path.is_file():
                raise DataError(f"{refused}: {name} is missing from the archive")
            if sha256_file(path) != expected:
                raise DataError(f"{refused}: {name} does not match its pinned sha256 (tampered or wrong commit)")
        for name, expected in OPTIONAL_FILES.items():
            path = scratch / name
            if path.is_file() and sha256_file(path) != expected:
                raise DataError(f"{refused}: {name} does not match its pinned sha256 (tampered or wrong commit)")
        # The archive does not carry the manifest; leave it beside the files so `sha256sum -c` works there.
        (scratch / "SHA256SUMS").write_text(manifest_text(), encoding="utf-8")
        if dest.exists():
            backup = work_dir / "previous"
            dest.rename(backup)
        scratch.rename(dest)


def ensure_data(data: Path | str | None = None, *, offline: bool = False) -> Path:
    """The data directory a command should read, downloaded first when it is the per-user one and lacks the files.

    A directory the user named (`--data`, `$EDSB_DATA`) is never written to: the loader's error says what is missing.
    `offline` (or `$EDSB_OFFLINE`) turns the download into an error naming the way to install from a local copy.
    """
    root = resolve_data_dir(data)
    if (root / CASES_DIR).is_dir() or explicit_data_dir(data):
        return root
    url = archive_url()
    if offline or offline_by_env():
        raise OfflineError(
            f"no benchmark data at {root}, and downloads are off (--offline / {OFFLINE_ENV}); {without_network(url)}"
        )
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True, highlight=False)
    console.print(
        f"edsb: first use: downloading the benchmark files ({REFERENCE_REPO} at {REFERENCE_COMMIT[:7]}, "
        f"{ARCHIVE_SIZE}, every sha256 verified) from {url} into {root}",
        markup=False,
    )
    fetch_data(root, url, progress=True)
    console.print(f"edsb: benchmark data verified at {root}", markup=False)
    return root
