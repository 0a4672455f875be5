"""The `edsb` app: its command classes, its consoles, and the one place a user error becomes a line and an exit code."""

from __future__ import annotations

import gc
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from edsb import __version__
from edsb.errors import EdsbError, hint
from edsb.results.rundir import NO_SPACE, disk_full


class _FlagsWithoutPlaceholders:
    """Help with one kind of placeholder: every option names its value in capitals (`--out DIR`, `--cases CASES`),
    an argument is shown by its name alone (`RUN_DIR`), and a flag (`--quiet`, `--help`) shows none. Typer would add
    `<bool>` to flags, as if they took a value, and a second `<path>` beside an argument's name. In a command whose
    options sit in named panels, `--help` joins the last one rather than open an `Options` panel of its own."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        params = self.get_params(ctx)  # type: ignore[attr-defined]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            elif param.param_type_name == "argument" and param.metavar is not None:
                param.display_type_rich = lambda ctx: None
        panels = list(dict.fromkeys(p for param in params if (p := getattr(param, "rich_help_panel", None))))
        help_option = self.get_help_option(ctx)  # type: ignore[attr-defined]
        if panels and help_option is not None:  # `--help` closes the last panel, not an `Options` panel of its own
            help_option.rich_help_panel = panels[-1]
        super().format_help(ctx, formatter)  # type: ignore[misc]


# Names another tool gives an option of edsb's: Inspect's tasks call the distraction levels `levels`.
_OPTION_SYNONYMS = {"--levels": "--distraction", "--level": "--distraction"}


class Command(_FlagsWithoutPlaceholders, TyperCommand):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """An unknown option that is another tool's name for one of this command's points to it; other typos keep
        click's own suggestions."""
        try:
            return super().parse_args(ctx, args)
        except typer.TyperException as exc:  # typer's own click: its NoSuchOption is not importable by a public name
            ours = _OPTION_SYNONYMS.get(getattr(exc, "option_name", ""))
            if type(exc).__name__ == "NoSuchOption" and ours and any(ours in param.opts for param in self.params):
                exc.message, exc.possibilities = f"{exc.message}{hint(ours)}", None  # type: ignore[attr-defined]
            raise


class CommandGroup(_FlagsWithoutPlaceholders, TyperGroup):
    pass


app = typer.Typer(
    cls=CommandGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Event-Driven Storytelling Benchmark harness: run, score and report LLM planners.",
)


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"edsb {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Event-Driven Storytelling Benchmark harness: run, score and report LLM planners."""


out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def print_error(message: str) -> None:
    """One `edsb: error:` line, never cut: a server's whole message and the fix (on a line of its own in the
    message) flattened into it, for the terminal to wrap and for grep to find."""
    err.print(f"edsb: error: {' '.join(message.split())}", markup=False, highlight=False, soft_wrap=True)


def _fail(message: str, exit_code: int) -> None:
    print_error(message)
    sys.exit(exit_code)


def entry() -> None:
    """The `edsb` command (console script and `python -m edsb`): `main`, then no collector pass at exit. Python's
    finalisation walks every object once more (a tenth of a second or more after a large sweep); the files edsb
    wrote are closed by then, so nothing is left for it to finalise."""
    try:
        main()
    finally:
        gc.freeze()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and an exit code (2 for usage errors), never a traceback."""
    try:
        code = app(args=argv, standalone_mode=False)
    except EdsbError as exc:
        _fail(str(exc), exc.exit_code)
    except typer.TyperException as exc:  # the command line itself: unknown option or command, value out of range
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help was printed; nothing else to say
            sys.exit(exc.exit_code)
        context = getattr(exc, "ctx", None)
        hint = f" (see `{context.command_path} --help`)" if context is not None else ""
        message = exc.format_message().replace("Value error, ", "")  # typer's wording for a value outside the choices
        _fail(f"{message}{hint}", exc.exit_code)
    except OSError as exc:  # the file system refused something the command needed
        detail = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)
        if exc.errno in NO_SPACE:
            detail = str(disk_full(exc.filename or "a file"))
        _fail(detail, 1)
    except KeyboardInterrupt:
        err.print("edsb: interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
