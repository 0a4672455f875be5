"""The pinned sha256 manifest of the official benchmark files (shipped with the package)."""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

MANIFEST_RESOURCE = "manifest.sha256"

# Files of the reference archive that `edsb data fetch` also keeps, pinned, but that a data directory may lack:
# the runner holds the one Narrator guideline line that is not in the prompt pack (see edsb.planning.prompt_pack).
OPTIONAL_FILES: dict[str, str] = {
    "benchmark/runner.py": "51cef8e91105595fbd543bfe6223b227ca063dcbf0da564bbd3bc0c488d3e47d",
}


def manifest_text() -> str:
    return resources.files("edsb.data").joinpath(MANIFEST_RESOURCE).read_text(encoding="utf-8")


def load_manifest() -> dict[str, str]:
    """Relative path -> sha256 for every file the benchmark needs, as pinned at the reference commit."""
    text = manifest_text()
    manifest: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            manifest[name.strip().removeprefix("*")] = digest
    return manifest


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_tree(root: Path, manifest: dict[str, str] | None = None) -> list[str]:
    """Problems (one line each) where files under root are missing or differ from the manifest."""
    manifest = manifest if manifest is not None else load_manifest()
    problems = []
    for name, expected in manifest.items():
        path = root / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif sha256_file(path) != expected:
            problems.append(f"{path}: sha256 differs from the pinned manifest (modified or corrupt)")
    return problems


def verified_optional(root: Path, name: str) -> Path | None:
    """An optional pinned file of the data directory, if present and unmodified."""
    path = root / name
    if path.is_file() and sha256_file(path) == OPTIONAL_FILES[name]:
        return path
    return None
