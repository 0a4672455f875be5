"""The options several commands share, and the options generated from the settings declaration: `edsb run` and
`edsb check-model` get one typer parameter per declared setting, with its flag, help, panel and bounds, so the
command line and the settings can never disagree."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import annotated_types
import typer
from pydantic import BaseModel

from edsb.settings.declare import Declared, Group, declared
from edsb.settings.run import DATA_HELP, Invocation, RunSettings
from edsb.settings.vocab import PROVIDER_DEFAULT

DataOption = Annotated[Path | None, typer.Option("--data", metavar="DIR", help=DATA_HELP, show_default=False)]
PerturbOption = Annotated[
    int,
    typer.Option(
        min=declared(RunSettings)["perturb"].bound(annotated_types.Ge),
        metavar="SEED",
        help="The robustness suite's renamed benchmark of this seed (0: the benchmark itself).",
    ),
]
OfflineOption = Annotated[bool, typer.Option("--offline", help=declared(Invocation)["offline"].help)]
AllOption = Annotated[
    bool,
    typer.Option("--all", help="Show every row of long lists (per case, reasons, cases that flip); default: 20."),
]


def declared_options(command: str, *models: type[BaseModel]) -> list[Declared]:
    """The declared settings that are options of `command`, panel by panel (a later model's setting of the same
    name replaces an earlier one's: check-model's own `--timeout`)."""
    found: dict[str, Declared] = {}
    for model in models:
        found.update({name: s for name, s in declared(model).items() if command in s.commands})
    return sorted(found.values(), key=lambda s: list(Group).index(s.group))


def declared_command(command: str, body: Callable[[dict[str, Any]], None], *models: type[BaseModel]) -> Any:
    """A typer callback whose parameters are the declared options of `command`; `body` receives them by field name,
    None when not given (a `--no-` flag given: its field false; a flag given: true), so that a flag left out leaves a
    config file's value alone."""

    settings = declared_options(command, *models)
    negated = [setting.name for setting in settings if setting.negated]
    flags = [setting.name for setting in settings if not setting.negated and _option_type(setting)[0] is bool]

    def callback(**given: Any) -> None:
        body(
            given
            | {name: False if given[name] else None for name in negated}
            | {name: given[name] or None for name in flags}
        )

    parameters = [_parameter(setting) for setting in settings]
    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in parameters}
    callback.__doc__, callback.__name__ = body.__doc__, body.__name__.lstrip("_")
    return callback


def _parameter(setting: Declared) -> inspect.Parameter:
    """One option: its type as the command line reads it, its default (not given), its help, panel and bounds."""
    kind, default = _option_type(setting)
    bounds = {"min": setting.bound(annotated_types.Ge), "max": setting.bound(annotated_types.Le)}
    if setting.name == "temperature":  # a number or the word that sends none: parsed here, bounds and all
        kind, bounds = Any, {"parser": _temperature_parser(setting)}
    option = typer.Option(
        setting.option,
        metavar=setting.metavar,
        help=setting.help,
        show_default=False,
        rich_help_panel=str(setting.group),
        **{name: value for name, value in bounds.items() if value is not None},
    )
    return inspect.Parameter(
        setting.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
    )


def _option_type(setting: Declared) -> tuple[Any, Any]:
    """A flag for a bool; a selection string for a list of integers; a repeatable choice for a list of words;
    else the field's own type, None when not given."""
    annotation = setting.info.annotation
    if annotation is bool:
        return bool, False
    if get_origin(annotation) is list:
        (inner,) = get_args(annotation)
        return (str | None, None) if inner is int else (list[inner] | None, None)  # type: ignore[valid-type]
    kinds = [kind for kind in get_args(annotation) if kind is not type(None)] or [annotation]
    return kinds[0] | None, None


def _temperature_parser(setting: Declared) -> Callable[[str], str | float]:
    """`--temperature`: a number within the declared bounds, or `default` (send none)."""
    low, high = setting.bound(annotated_types.Ge), setting.bound(annotated_types.Le)

    def parse(text: str) -> str | float:
        if text.strip().lower() == PROVIDER_DEFAULT:
            return PROVIDER_DEFAULT
        try:
            value = float(text)
        except ValueError:
            raise typer.BadParameter(f"{text!r} is neither a number nor `{PROVIDER_DEFAULT}`") from None
        if not low <= value <= high:
            raise typer.BadParameter(f"{text} is not in the range {low:g} to {high:g}")
        return value

    return parse
