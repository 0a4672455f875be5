"""User-facing errors: each renders as one line, and the CLI turns it into an exit code without a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from json import JSONDecodeError

    from pydantic import ValidationError


class EdsbError(Exception):
    """Something the user can fix (bad input, missing data, unreachable server)."""

    exit_code = 1


class UsageError(EdsbError):
    """A command-line argument that cannot be honoured (unknown case id, tag, variant, ...)."""

    exit_code = 2


class DataError(EdsbError):
    """A benchmark file that is missing, corrupt or does not match the pinned manifest."""


class OfflineError(DataError):
    """The benchmark files are missing and downloads are forbidden (`--offline`, `EDSB_OFFLINE`): the option is what
    cannot be honoured, so it exits as a usage error does."""

    exit_code = 2


def validation_message(exc: ValidationError) -> str:
    """The first problem of a pydantic error as `field.path: message`, plus how many more there are."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def json_error_message(exc: JSONDecodeError) -> str:
    """Where and why JSON did not parse, as `Expecting value: line 2 column 5`. Some of json's messages end in
    "at" (`Unterminated string starting at`), so the position follows a colon, as in json's own wording."""
    return f"{exc.msg}: line {exc.lineno} column {exc.colno}"


def closest(given: str, choices: Iterable[str]) -> str | None:
    """The choice `given` most likely misspells (difflib's similarity of at least 0.6), or None."""
    matches = difflib.get_close_matches(given, list(choices), n=1)
    return matches[0] if matches else None


def hint(suggestion: str | None, listing: str = "") -> str:
    """What follows "unknown X" in an error, the same everywhere (model names, config keys, case ids):
    ` (did you mean 'x'?)`, then what is valid when `listing` says it, or nothing."""
    parts = [f"did you mean {suggestion!r}?"] if suggestion else []
    parts += [listing] if listing else []
    return f" ({' '.join(parts)})" if parts else ""
