"""edsb: a harness for the Event-Driven Storytelling Benchmark (Lim et al., ICCV 2025)."""

from importlib.metadata import PackageNotFoundError, version


def _version() -> str:
    """edsb's version, written once, in pyproject.toml: as the installed package records it, else (a source tree
    put on the path without installing it) as the tree's pyproject.toml says."""
    try:
        return version("edsb")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        try:
            pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text("utf-8"))
            return str(pyproject["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


__version__ = _version()

# The reference repository whose evaluator and prompts edsb reproduces.
REFERENCE_REPO = "rms0329/Event-Driven-Storytelling"
REFERENCE_COMMIT = "8a6f726951decf3327d4e015c11202c19dca1749"
