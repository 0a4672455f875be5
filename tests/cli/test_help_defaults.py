"""Every default has one home: each `(default N)` that `edsb run --help` states is its declaration's default."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer

from edsb.cli import app
from edsb.runner.config import config_default, run_overrides
from edsb.settings.declare import declared
from edsb.settings.run import RunSettings

# A default stated as a value (`default 4)`, `default: local.`, `default 0-2;`), not in words (`default its own host`).
DEFAULT = re.compile(r"default:? (?P<value>[\w.\-]+?)[.]?[);:,]", re.IGNORECASE)


def _options(command: str) -> dict[str, Any]:
    """The click options of an `edsb` command, by parameter name."""
    group: Any = typer.main.get_command(app)
    return {p.name: p for p in group.commands[command].params if p.param_type_name == "option" and p.name}


def _as_field_value(text: str, default: Any) -> Any:
    """The help's spelling of a default read back as the field's value (`0-2` as a list, `none` as None)."""
    if text == "none":
        return None
    if text == "all" and default == []:  # no selection: every case
        return []
    if isinstance(default, list) and re.fullmatch(r"\d+-\d+", text):
        low, high = map(int, text.split("-"))
        return list(range(low, high + 1))
    if isinstance(default, list):
        return text.split(",")
    return type(default)(text)


STATED = [
    (name, field)
    for name, field in ((n, next(iter(run_overrides({n: 1})))) for n in _options("run"))
    if field in declared(RunSettings) and DEFAULT.search(_options("run")[name].help or "")
]


def test_the_run_help_states_defaults() -> None:
    assert len(STATED) >= 20, STATED  # the help of most options says what they default to


@pytest.mark.parametrize(("option", "field"), STATED, ids=[name for name, _ in STATED])
def test_a_default_in_the_help_is_the_configs(option: str, field: str) -> None:
    help_text = _options("run")[option].help or ""
    stated = DEFAULT.search(help_text)
    assert stated is not None
    default = config_default(field)
    assert _as_field_value(stated.group("value"), default) == default, help_text


def test_check_model_sends_the_runs_generation_options() -> None:
    generation = {"temperature", "max_tokens", "model_seed", "reasoning_effort", "thinking_budget", "thinking_level"}
    assert generation | {"json_mode"} <= set(_options("check-model"))
    for name in generation:
        assert _options("check-model")[name].help == _options("run")[name].help
