"""User-facing errors: each renders as one line, and the CLI turns it into an exit code without a traceback."""


class EdsbError(Exception):
    """Something the user can fix (bad input, missing data, unreachable server)."""

    exit_code = 1


class UsageError(EdsbError):
    """A command-line argument that cannot be honoured (unknown case id, tag, variant, ...)."""

    exit_code = 2


class DataError(EdsbError):
    """A benchmark file that is missing, corrupt or does not match the pinned manifest."""


class RunError(Exception):
    """Something that makes one benchmark run an execution error (not a user error); `kind` classifies it in reports.

    Subclasses set a class-level `kind`, e.g. `narrator_format`; the runner records `<kind>` and the message.
    """

    kind = "run_error"
