"""The declaration of a run's settings (`edsb.settings.run`) against every place that reads it: the options of
`edsb run` and `edsb check-model`, the keys a config file takes, config.json, the run card, the Inspect tasks'
parameters and the hint of a refused resume. A setting changed in one place only fails here."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import annotated_types
import pytest
import typer

from edsb.cli import app
from edsb.llm.factory import CHECK_TIMEOUT_S
from edsb.llm.openai_client import DEFAULT_MAX_RESPONSE_BYTES
from edsb.planning.plans import PlanLimits
from edsb.report.card import Sampling
from edsb.runner.config import IDENTITY_FIELDS, RunConfig, check_resume, load_config_file, load_session_options
from edsb.sandbox.limits import SandboxLimits
from edsb.settings.declare import CHECK_MODEL, RUN, Declared, declared
from edsb.settings.run import GENERATION_FIELDS, CheckModelSettings, Invocation, RunSettings
from edsb.text import TextLimits

SETTINGS = declared(RunSettings)
COMMANDS = {RUN: SETTINGS, CHECK_MODEL: {**SETTINGS, **declared(CheckModelSettings)}}


def _options(command: str) -> dict[str, Any]:
    """The click options of a command, by parameter name (`--help` aside)."""
    group: Any = typer.main.get_command(app)
    return {p.name: p for p in group.commands[command].params if p.param_type_name == "option" and p.name != "help"}


@pytest.mark.parametrize("command", [RUN, CHECK_MODEL])
def test_every_option_is_a_declared_setting_as_declared(command: str) -> None:
    expected = {name: s for name, s in COMMANDS[command].items() if command in s.commands}
    options = _options(command)
    assert set(options) == set(expected)
    for name, option in options.items():
        setting = expected[name]
        assert (option.opts, option.help, option.rich_help_panel) == ([setting.option], setting.help, setting.group)
        assert option.is_flag == (setting.info.annotation is bool), name
        low, high = option.min, option.max
        if name != "temperature":  # parsed by a function of its own, from the same bounds
            assert (low, high) == (setting.bound(annotated_types.Ge), setting.bound(annotated_types.Le)), name


def test_the_temperature_option_enforces_the_declared_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    from edsb.cli import main

    high = SETTINGS["temperature"].bound(annotated_types.Le)
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--temperature", str(high + 0.5)])
    assert stopped.value.code == 2
    assert f"not in the range 0 to {high:g}" in capsys.readouterr().err


def _sample(setting: Declared) -> Any:
    """A value a config file may give the setting."""
    kind = setting.info.annotation
    if kind is bool:
        return True
    if get_origin(kind) is list:
        return "0" if get_args(kind)[0] is int else [next(iter(setting.choices or []))]
    if setting.choices is not None:
        return next(iter(setting.choices)).value
    kinds = [k for k in get_args(kind) if k is not type(None)] or [kind]
    return {int: 100, float: 1.5}.get(kinds[0], "x")


FILE_KEYS = [(s, key) for s in [*SETTINGS.values()] if s.in_file for key in s.keys]


@pytest.mark.parametrize(("setting", "key"), FILE_KEYS, ids=[key for _, key in FILE_KEYS])
def test_every_key_of_the_declaration_sets_its_field_from_a_config_file(
    tmp_path: Path, setting: Declared, key: str
) -> None:
    value = _sample(setting)
    path = tmp_path / "run.toml"
    path.write_text(f"{key} = {_toml(value)}\n", encoding="utf-8")
    read = {**load_config_file(path), **load_session_options(path)}
    opposite = setting.negated and key.replace("-", "_") == setting.option.removeprefix("--").replace("-", "_")
    assert read == {setting.name: (not value) if opposite else value}


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    return repr(value).replace("'", '"')


def test_a_setting_kept_out_of_config_files_is_refused_there(tmp_path: Path) -> None:
    from edsb.errors import UsageError

    kept_out = [s for s in SETTINGS.values() if not s.in_file]
    assert [s.name for s in kept_out] == ["config"]
    (tmp_path / "run.toml").write_text('config = "other.toml"\n', encoding="utf-8")
    with pytest.raises(UsageError, match="cannot be set from a config file"):
        load_config_file(tmp_path / "run.toml")


def test_config_json_holds_every_run_setting_flat_and_no_invocation_option(tmp_path: Path) -> None:
    import json

    from edsb.runner.config import write_config

    write_config(tmp_path, RunConfig(sandbox="restricted"))
    written = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    run_settings = {name for name in SETTINGS if name not in Invocation.model_fields}
    assert set(written) == {"format", "edsb_version", *run_settings}
    assert list(written)[1 : 1 + len(GENERATION_FIELDS)] == list(GENERATION_FIELDS)  # as every edsb wrote it
    assert RunConfig.model_validate({k: v for k, v in written.items() if k != "format"}) == RunConfig(
        sandbox="restricted", sampler_secret=None
    )


def test_the_run_card_shows_every_generation_setting_by_its_declared_name() -> None:
    shown = set(Sampling.model_fields) - {"not_sent", "sent"}
    assert set(GENERATION_FIELDS) <= shown <= set(SETTINGS)


def test_the_inspect_tasks_take_the_declared_task_parameters() -> None:
    pytest.importorskip("inspect_ai")
    from edsb.inspect_tasks.tasks import SETTINGS as TASK_SETTINGS
    from edsb.runner.config import run_overrides

    declared_names = [s.task_name for s in SETTINGS.values() if s.task_name]
    assert list(TASK_SETTINGS) == declared_names
    assert set(run_overrides(dict.fromkeys(TASK_SETTINGS, 1))) <= set(SETTINGS)
    assert "json_mode" in TASK_SETTINGS and "code_memory" in TASK_SETTINGS  # the names Inspect users pass


def _changed(setting: Declared, old: Any) -> Any:
    """Another valid value of a setting, for a resume that must be refused."""
    if isinstance(old, bool):
        return not old
    if setting.choices is not None:
        return next(c for c in setting.choices if c != old and c.value != old and c.value != "auto")
    if isinstance(old, int | float):
        return old + 1
    return "other" if old is not None else _sample(setting)


@pytest.mark.parametrize("name", [n for n in IDENTITY_FIELDS if n in SETTINGS])
def test_a_refused_resume_names_the_declared_option(tmp_path: Path, name: str) -> None:
    from edsb.errors import UsageError

    config = RunConfig(sandbox="restricted", sampler_secret="s", model_seed=3, max_tokens=9)
    check_resume(tmp_path, config)
    setting = SETTINGS[name]
    old = config.model_dump()[name]
    other = RunConfig.model_validate({**config.model_dump(), name: _changed(setting, old)})
    with pytest.raises(UsageError) as refused:
        check_resume(tmp_path, other)
    assert setting.option in str(refused.value), str(refused.value)


def test_the_numbers_a_lower_layer_applies_are_the_declared_defaults() -> None:
    config = RunConfig(sandbox="restricted")
    assert (PlanLimits(), TextLimits()) == (config.plan_limits, config.text_limits)
    limits = SandboxLimits()
    assert (limits.timeout, limits.memory_bytes) == (config.code_timeout, config.code_memory_mb << 20)
    # Defaults of the model layer, kept where the providers live.
    assert config.max_response_mb << 20 == DEFAULT_MAX_RESPONSE_BYTES
    assert CheckModelSettings().timeout == CHECK_TIMEOUT_S


def test_every_choice_is_one_vocabulary() -> None:
    """A setting's fixed words are the vocabulary's enum, and the packages that act on them re-export that one."""
    from edsb.planning import generation, variants
    from edsb.sandbox import limits
    from edsb.settings import vocab

    assert (variants.VariantName, variants.SamplerName, variants.PresetName) == (
        vocab.VariantName,
        vocab.SamplerName,
        vocab.PresetName,
    )
    assert (limits.SandboxChoice, generation.ReasoningEffort) == (vocab.SandboxChoice, vocab.ReasoningEffort)
    assert all(issubclass(s.choices, Enum) and s.choices.__module__ == vocab.__name__ for s in _with_choices())


def _with_choices() -> list[Declared]:
    return [s for s in SETTINGS.values() if s.choices is not None]
